// Importer of NVIDIA nccl-tests output and of vTrain's all-reduce tables
// (collectives.hpp, docs/comm.md). Everything is parsed and checked before the
// store sees a row, so a bad line anywhere leaves the store as it was.
//
// nccl-tests text (all_reduce_perf and siblings, v2.x):
//   # Collective test starting: all_reduce_perf            (recent versions)
//   # nThread 1 nGpus 8 minBytes 8 ... warmup iters: 5 iters: 20 agg iters: 1 ...
//   #  Rank  0 Group  0 Pid 1234 on host01 device  0 [0x07] NVIDIA A100-SXM4-80GB
//   #       size   count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
//            8       2    float    sum    -1  19.04   0.00   0.00      0  18.68   0.00   0.00      0
// time in microseconds, algbw/busbw in GB/s, out-of-place then in-place;
// versions before 2.10 had no root column (12 fields) and printed a float max
// error where #wrong is now (0e+00); #wrong is "N/A" when checking is off.
//
// vTrain (github.com/VIA-Research/vTrain, AR_GPU<N>_1M_1024M_LUT):
//   size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)
//   1048576,262144,float,44210,23.72,45100,23.25
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "scaledl/comm/collectives.hpp"
#include "scaledl/core/error.hpp"

namespace scaledl {

namespace {

constexpr const char* kTextRow =
    "an nccl-tests row is: size count type redop root time algbw busbw #wrong time algbw busbw #wrong";
constexpr const char* kCsvHeader = "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)";

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

/// Whether `s` is UTF-8 text: strings of the file and the options end up in JSON
/// (`comm fit --out`, `db export`), which holds nothing else.
bool is_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

/// A field for an error message: at most 40 characters (a garbage line can be long).
std::string clip(const std::string& s) {
  return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string t; in >> t;) w.push_back(t);
  return w;
}

bool parse_i64(const std::string& t, int64_t* v) {
  const char* b = t.data();
  const char* e = t.data() + t.size();
  auto r = std::from_chars(b, e, *v);
  return !t.empty() && r.ec == std::errc() && r.ptr == e;
}

bool parse_f64(const std::string& t, double* v) {
  if (t.empty() || std::isspace(static_cast<unsigned char>(t[0]))) return false;
  char* end = nullptr;
  *v = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && std::isfinite(*v);
}

/// nccl-tests' type names -> the store's dtype names (bench: fp32, fp16, bf16).
bool map_dtype(const std::string& t, std::string* out) {
  static const std::map<std::string, std::string> m = {
      {"float", "fp32"},  {"half", "fp16"},     {"bfloat16", "bf16"},  {"double", "fp64"},
      {"int8", "int8"},   {"uint8", "uint8"},   {"int32", "int32"},    {"uint32", "uint32"},
      {"int64", "int64"}, {"uint64", "uint64"}, {"f8e4m3", "fp8e4m3"}, {"f8e5m2", "fp8e5m2"},
      {"fp32", "fp32"},   {"fp16", "fp16"},     {"bf16", "bf16"}};
  auto it = m.find(t);
  if (it == m.end()) return false;
  *out = it->second;
  return true;
}

/// What the file name says: collective and (vTrain) world size; "" / 0 when silent.
std::string collective_from_name(const std::string& path) {
  const std::string b = lower(std::filesystem::path(path).filename().string());
  if (b.rfind("ar_gpu", 0) == 0 || b.find("all_reduce") != std::string::npos ||
      b.find("allreduce") != std::string::npos)
    return "allreduce";
  if (b.find("all_gather") != std::string::npos || b.find("allgather") != std::string::npos)
    return "allgather";
  if (b.find("reduce_scatter") != std::string::npos || b.find("reducescatter") != std::string::npos)
    return "reducescatter";
  if (b.find("sendrecv") != std::string::npos || b.find("send_recv") != std::string::npos) return "sendrecv";
  return "";
}

int64_t world_from_name(const std::string& path) {
  const std::string b = std::filesystem::path(path).filename().string();
  if (b.rfind("AR_GPU", 0) != 0) return 0;
  size_t i = 6, j = 6;
  while (j < b.size() && std::isdigit(static_cast<unsigned char>(b[j]))) ++j;
  int64_t n = 0;
  return j > i && parse_i64(b.substr(i, j - i), &n) ? n : 0;
}

/// What the header lines of a file said.
struct Header {
  std::string banner;  ///< collective of "# Collective test starting: X" ("" = none)
  size_t banner_line = 0;
  std::set<int64_t> ranks;  ///< from "#  Rank  r ..." lines
  std::set<std::string> hosts;
  std::string rank0_gpu;  ///< GPU name on rank 0's line
  size_t rank0_line = 0;
  int64_t threads_x_gpus = 0;  ///< nThread x nGpus (ranks of one process)
  int repeats = 0;             ///< "iters: K" (not warmup or agg iters)
};

void read_header_line(const std::string& line, size_t lineno, Header* h) {
  static const std::string kBanner = "Collective test starting:";
  if (auto p = line.find(kBanner); p != std::string::npos) {
    h->banner = trim(line.substr(p + kBanner.size()));
    h->banner_line = lineno;
    return;
  }
  const auto w = words(line.substr(1));
  if (w.size() >= 2 && w[0] == "Rank") {
    int64_t r = 0;
    if (!parse_i64(w[1], &r)) return;  // a heading that happens to start with "Rank"
    h->ranks.insert(r);
    for (size_t i = 2; i + 1 < w.size(); ++i)
      if (w[i] == "on") h->hosts.insert(w[i + 1]);
    if (r == 0) {  // "... device  0 [0x07] NVIDIA A100-SXM4-80GB": the name follows the bus id
      for (size_t i = 2; i < w.size(); ++i)
        if (w[i].size() > 2 && w[i].front() == '[' && w[i].back() == ']') {
          std::string name;
          for (size_t k = i + 1; k < w.size(); ++k) name += (name.empty() ? "" : " ") + w[k];
          h->rank0_gpu = name;
          h->rank0_line = lineno;
          break;
        }
    }
    return;
  }
  if (!w.empty() && w[0] == "nThread") {
    int64_t threads = 0, gpus = 0;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      if (w[i] == "nThread") parse_i64(w[i + 1], &threads);
      if (w[i] == "nGpus") parse_i64(w[i + 1], &gpus);
      int64_t k = 0;
      if (w[i] == "iters:" && (i == 0 || (w[i - 1] != "warmup" && w[i - 1] != "agg")) &&
          parse_i64(w[i + 1], &k))
        h->repeats = static_cast<int>(k);
    }
    // Each at most 2^20 (a product that cannot overflow; --world's own range).
    if (threads > 0 && gpus > 0 && threads <= (1 << 20) && gpus <= (1 << 20))
      h->threads_x_gpus = threads * gpus;
  }
}

/// One out-of-place or in-place half of a data row.
struct Half {
  double time_s = 0;
  double algbw = NAN;  ///< GB/s as printed (nccl-tests text); NaN where the layout has none (vTrain)
  double busbw = 0;
  bool wrong = false;
};

/// A bandwidth computed from size and time agrees with the one printed beside
/// them: within the printing's rounding (2 decimals) plus 2 % (the time's own
/// rounding is at most 0.1 %). nccl-tests derives both columns from the same time.
bool agrees(double computed_gbs, double printed_gbs) {
  return std::fabs(computed_gbs - printed_gbs) <= 0.006 + 0.02 * printed_gbs;
}

struct Row {
  size_t line = 0;
  double bytes = 0;
  std::string dtype;
  Half out, in;
};

class LineError {
 public:
  LineError(const std::string& path, size_t line) : path_(path), line_(line) {}
  template <typename... Args>
  [[noreturn]] void operator()(fmt::format_string<Args...> f, Args&&... args) const {
    fail("{}:{}: {}", path_, line_, fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  const std::string& path_;
  size_t line_;
};

/// size, count, type shared by both layouts; `what` names the layout for messages.
void parse_size_count_type(const LineError& bad, const std::string& size, const std::string& count,
                           const std::string& type, const char* what, Row* r) {
  int64_t v = 0;
  if (!parse_i64(size, &v) || v < 0) bad("size=\"{}\" is not a byte count ({})", clip(size), what);
  r->bytes = static_cast<double>(v);
  if (!parse_i64(count, &v) || v < 0) bad("count=\"{}\" is not an element count ({})", clip(count), what);
  if (!map_dtype(type, &r->dtype))
    bad("type=\"{}\" is not an nccl-tests type (float, half, bfloat16, double, int8, uint8, int32, uint32, "
        "int64, "
        "uint64, f8e4m3, f8e5m2)",
        clip(type));
}

double parse_time(const LineError& bad, const std::string& t, const char* field, double unit_s,
                  const char* what) {
  double v = 0;
  if (!parse_f64(t, &v) || v <= 0) bad("{}=\"{}\" is not a positive time ({})", field, clip(t), what);
  return v * unit_s;
}

double parse_bw(const LineError& bad, const std::string& t, const char* field, const char* what) {
  double v = 0;
  if (!parse_f64(t, &v) || v < 0) bad("{}=\"{}\" is not a bandwidth in GB/s >= 0 ({})", field, clip(t), what);
  return v;
}

/// #wrong: an error count (> 0: the collective returned wrong values), "N/A"
/// (not checked), or before nccl-tests 2.10 a float max error (not a failure).
bool parse_wrong(const LineError& bad, const std::string& t, const char* field) {
  if (t == "N/A") return false;
  int64_t n = 0;
  if (parse_i64(t, &n)) {
    if (n < 0) bad("{}=\"{}\" is not an error count >= 0 ({})", field, clip(t), kTextRow);
    return n > 0;
  }
  double e = 0;
  if (parse_f64(t, &e) && e >= 0) return false;
  bad("{}=\"{}\" is not an error count, N/A or an error value ({})", field, clip(t), kTextRow);
}

Row parse_text_row(const LineError& bad, const std::vector<std::string>& w, size_t lineno) {
  if (w.size() != 13 && w.size() != 12)
    bad("{} fields, expected 13 ({}), or 12 without root (nccl-tests before 2.10)", w.size(), kTextRow);
  Row r;
  r.line = lineno;
  parse_size_count_type(bad, w[0], w[1], w[2], kTextRow, &r);
  if (w[3].empty() || !std::all_of(w[3].begin(), w[3].end(), [](char ch) { return std::isalpha(ch); }))
    bad("redop=\"{}\" is not a reduction name (sum, prod, min, max, avg, none) ({})", clip(w[3]), kTextRow);
  size_t i = 4;
  if (w.size() == 13) {
    int64_t root = 0;
    if (!parse_i64(w[4], &root) || root < -1)
      bad("root=\"{}\" is not a rank or -1 ({})", clip(w[4]), kTextRow);
    i = 5;
  }
  const char* names[2][4] = {{"time", "algbw", "busbw", "#wrong"},
                             {"in-place time", "in-place algbw", "in-place busbw", "in-place #wrong"}};
  for (int half = 0; half < 2; ++half, i += 4) {
    Half& h = half == 0 ? r.out : r.in;
    h.time_s = parse_time(bad, w[i], names[half][0], 1e-6, kTextRow);  // microseconds
    h.algbw = parse_bw(bad, w[i + 1], names[half][1], kTextRow);
    h.busbw = parse_bw(bad, w[i + 2], names[half][2], kTextRow);
    h.wrong = parse_wrong(bad, w[i + 3], names[half][3]);
  }
  return r;
}

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> f;
  std::string cur;
  for (char ch : s) {
    if (ch == ',') {
      f.push_back(trim(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  f.push_back(trim(cur));
  return f;
}

Row parse_csv_row(const LineError& bad, const std::string& line, size_t lineno) {
  static const std::string what = std::string("a vTrain row is: ") + kCsvHeader;
  const auto f = split_csv(line);
  if (f.size() != 7) bad("{} fields, expected 7 ({})", f.size(), what);
  Row r;
  r.line = lineno;
  parse_size_count_type(bad, f[0], f[1], f[2], what.c_str(), &r);
  r.out.time_s = parse_time(bad, f[3], "time(ns)", 1e-9, what.c_str());
  r.out.busbw = parse_bw(bad, f[4], "busbw(GB/s)", what.c_str());
  r.in.time_s = parse_time(bad, f[5], "in-place time(ns)", 1e-9, what.c_str());
  r.in.busbw = parse_bw(bad, f[6], "in-place busbw(GB/s)", what.c_str());
  return r;
}

}  // namespace

std::string canonical_collective(const std::string& s, const std::string& key) {
  std::string t = lower(trim(s));
  if (t.size() > 5 && t.compare(t.size() - 5, 5, "_perf") == 0) t.resize(t.size() - 5);
  t.erase(std::remove_if(t.begin(), t.end(), [](char ch) { return ch == '_' || ch == '-'; }), t.end());
  if (t == "allreduce" || t == "allgather" || t == "reducescatter" || t == "sendrecv") return t;
  if (t == "p2p") return "sendrecv";
  fail("{}=\"{}\" is not allreduce, allgather, reducescatter or sendrecv", key, clip(s));
}

void NcclTestsImportOptions::validate() const {
  SCALEDL_CHECK(!campaign.empty(), "--campaign must not be empty");
  SCALEDL_CHECK(world == 0 || world >= 2, "--world={} must be >= 2 (ranks of the collective)", world);
  SCALEDL_CHECK(nodes >= 0, "--nodes={} must be >= 1", nodes);
  SCALEDL_CHECK(world == 0 || nodes <= world, "--nodes={} must be <= --world={}", nodes, world);
  SCALEDL_CHECK(level.empty() || level == "intra-node" || level == "inter-node",
                "--level=\"{}\" is not intra-node or inter-node", level);
  if (!collective.empty()) canonical_collective(collective, "--collective");
  SCALEDL_CHECK(!backend.empty(), "--backend must not be empty");
  SCALEDL_CHECK(is_utf8(campaign), "--campaign is not UTF-8 text");
  SCALEDL_CHECK(is_utf8(device), "--device is not UTF-8 text");
  SCALEDL_CHECK(is_utf8(backend), "--backend is not UTF-8 text");
}

namespace {

// parse_nccl_tests_text's steps: read the table (header lines and rows), tell
// the collective, the world and where the ranks ran, then turn each half of a
// row into a measurement unless it contradicts the file's own bandwidths.

/// The lines of a file: what its header said and its data rows.
struct Table {
  Header h;
  std::vector<Row> rows;
  bool csv = false;  ///< a vTrain table (its first line is kCsvHeader)
};

Table read_table(const std::string& text, const std::string& name) {
  Table t;
  size_t skipped_zero = 0;
  bool first = true;
  std::istringstream in(text);
  size_t lineno = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++lineno;
    const std::string line = trim(raw);
    if (line.empty()) continue;
    const LineError bad(name, lineno);
    if (first) {
      first = false;
      if (line.rfind("size(B)", 0) == 0) {
        SCALEDL_CHECK(line == kCsvHeader, "{}:{}: header \"{}\" is not vTrain's \"{}\"", name, lineno,
                      clip(line), kCsvHeader);
        t.csv = true;
        continue;
      }
    }
    Row r;
    if (t.csv) {
      r = parse_csv_row(bad, line, lineno);
    } else {
      if (line[0] == '#') {
        read_header_line(line, lineno, &t.h);
        continue;
      }
      // NCCL's own log lines (NCCL_DEBUG=INFO / WARN) interleave with the table.
      if (line.find("NCCL INFO") != std::string::npos || line.find("NCCL WARN") != std::string::npos)
        continue;
      r = parse_text_row(bad, words(line), lineno);
    }
    if (r.bytes == 0) {  // nccl-tests -b 0: a latency-only row the store cannot key by size
      ++skipped_zero;
      continue;
    }
    t.rows.push_back(std::move(r));
  }
  SCALEDL_CHECK(
      !t.rows.empty(), "{}: no data rows ({}{})", name,
      t.csv ? "a vTrain table with a header only" : "is it the output of an nccl-tests *_perf binary?",
      skipped_zero ? fmt::format(", {} rows of size 0 skipped", skipped_zero) : std::string());
  return t;
}

/// Collective: the banner, then the file name; --collective must agree with them.
/// *said_by_file: whether the file itself (banner or name) told it.
std::string resolve_collective(const Header& h, const std::string& name, const NcclTestsImportOptions& o,
                               bool* said_by_file) {
  std::string from_file, said_by;
  if (!h.banner.empty()) {
    from_file = canonical_collective(h.banner, fmt::format("{}:{}: collective", name, h.banner_line));
    said_by = "its '# Collective test starting' line";
  } else if (!(from_file = collective_from_name(name)).empty()) {
    said_by = "its file name";
  }
  std::string collective = from_file;
  *said_by_file = !from_file.empty();
  if (!o.collective.empty()) {
    const std::string c = canonical_collective(o.collective, "--collective");
    SCALEDL_CHECK(from_file.empty() || c == from_file, "--collective={} but {} is {} output (from {})", c,
                  name, from_file, said_by);
    collective = c;
  }
  SCALEDL_CHECK(
      !collective.empty(),
      "{}: cannot tell the collective (no '# Collective test starting' line, and the file name has none of "
      "all_reduce, all_gather, reduce_scatter, sendrecv): pass --collective",
      name);
  return collective;
}

/// World: the "#  Rank" lines, vTrain's AR_GPU<N>, --world, nThread x nGpus.
/// *said_by_file: whether the file itself (rank lines or name) told it.
int64_t resolve_world(const Header& h, const std::string& name, const NcclTestsImportOptions& o,
                      bool* said_by_file) {
  const int64_t listed = !h.ranks.empty() ? static_cast<int64_t>(h.ranks.size()) : world_from_name(name);
  int64_t world = 0;
  if (o.world > 0) {
    SCALEDL_CHECK(listed == 0 || listed == o.world, "--world={} but {} {} {} ranks", o.world, name,
                  h.ranks.empty() ? "is named for" : "lists", listed);
    world = o.world;
  } else if (listed > 0) {
    world = listed;
  } else if (h.threads_x_gpus > 0) {
    world = h.threads_x_gpus;  // one process: its threads x GPUs (under MPI pass --world)
  }
  SCALEDL_CHECK(world != 0,
                "{}: the file does not give the world size (no '#  Rank' lines, no nThread/nGpus line): "
                "pass --world N",
                name);
  SCALEDL_CHECK(world >= 2, "{}: world={}: a collective over one rank is not a measurement of communication",
                name, world);
  *said_by_file = listed > 0;
  return world;
}

/// Where the ranks ran: nodes (--nodes, else the hosts of the "#  Rank" lines),
/// level and device (--device, else rank 0's GPU).
struct Placement {
  int64_t nodes = 1;
  std::string level, device;
};

Placement resolve_placement(const Header& h, const std::string& name, const NcclTestsImportOptions& o,
                            int64_t world) {
  Placement p;
  const int64_t hosts = static_cast<int64_t>(h.hosts.size());
  p.nodes = o.nodes > 0 ? o.nodes : (hosts > 0 ? hosts : 1);
  SCALEDL_CHECK(o.nodes == 0 || hosts == 0 || hosts == o.nodes,
                "--nodes={} but the ranks of {} sit on {} hosts", o.nodes, name, hosts);
  SCALEDL_CHECK(p.nodes <= world, "{}: nodes={} must be <= world={}", name, p.nodes, world);
  p.level = !o.level.empty() ? o.level : (p.nodes > 1 ? "inter-node" : "intra-node");
  SCALEDL_CHECK(!(p.level == "intra-node" && p.nodes > 1),
                "--level=intra-node but the ranks of {} sit on {} nodes", name, p.nodes);
  SCALEDL_CHECK(!o.device.empty() || is_utf8(h.rank0_gpu), "{}:{}: the GPU name of rank 0 is not UTF-8 text",
                name, h.rank0_line);
  p.device = !o.device.empty() ? o.device : (h.rank0_gpu.empty() ? "" : "cuda:" + h.rank0_gpu);
  return p;
}

/// Issue #39 case 10: each half's time against the file's own bandwidth
/// columns (nccl-tests: algbw = size / time, busbw = algbw x the collective's
/// factor a(N) of comm_factors: 2(N-1)/N all-reduce, (N-1)/N all-gather and
/// reduce-scatter, 1 send/recv). algbw is checked wherever printed; busbw in
/// vTrain's tables (their only bandwidth) and in text whose collective and
/// world the file itself states (not --collective / --world).
struct BandwidthCheck {
  std::string collective;
  int64_t world = 0;
  double factor = 1;
  bool check_busbw = false;
  double time_unit_s = 1e-6;
  const char* time_unit = "us";

  /// Why half `half` (0 out-of-place, 1 in-place) of `r` is refused; "" when it is not.
  std::string contradiction(const Row& r, const Half& x, int half) const {
    const double alg = r.bytes / x.time_s / 1e9;  // GB/s
    const char* io = half == 0 ? "" : "in-place ";
    if (!std::isnan(x.algbw) && !agrees(alg, x.algbw))
      return fmt::format(
          "line {}: {}time={:g} {} of size {:.0f} gives algbw {:.4g} GB/s but the file says {:g}", r.line, io,
          x.time_s / time_unit_s, time_unit, r.bytes, alg, x.algbw);
    if (check_busbw && !agrees(alg * factor, x.busbw))
      return fmt::format(
          "line {}: {}time={:g} {} of size {:.0f} gives busbw {:.4g} GB/s ({} over {} ranks: x{:g}) but "
          "the file says {:g}",
          r.line, io, x.time_s / time_unit_s, time_unit, r.bytes, alg * factor, collective, world, factor,
          x.busbw);
    return "";
  }
};

}  // namespace

std::vector<CollectiveMeasurement> parse_nccl_tests_text(const std::string& text, const std::string& name,
                                                         const NcclTestsImportOptions& o,
                                                         NcclTestsRefused* refused) {
  o.validate();
  const Table t = read_table(text, name);
  const Header& h = t.h;
  bool collective_said_by_file = false, world_said_by_file = false;
  const std::string collective = resolve_collective(h, name, o, &collective_said_by_file);
  const int64_t world = resolve_world(h, name, o, &world_said_by_file);
  const Placement at = resolve_placement(h, name, o, world);

  BandwidthCheck check;
  check.collective = collective;
  check.world = world;
  check.factor = comm_factors(collective, CommForm::Ring, world).a;
  check.check_busbw = t.csv || (collective_said_by_file && world_said_by_file);
  check.time_unit_s = t.csv ? 1e-9 : 1e-6;
  check.time_unit = t.csv ? "ns" : "us";
  size_t n_refused = 0, n_halves = 0;
  std::string first_refused;

  std::vector<CollectiveMeasurement> out;
  out.reserve(2 * t.rows.size());
  for (const auto& r : t.rows) {
    for (int half = 0; half < 2; ++half) {
      const Half& x = half == 0 ? r.out : r.in;
      ++n_halves;
      if (const std::string why = check.contradiction(r, x, half); !why.empty()) {
        if (n_refused++ == 0) first_refused = why;
        continue;
      }
      CollectiveMeasurement m;
      m.campaign = o.campaign;
      m.collective = collective;
      m.backend = o.backend;
      m.device = at.device;
      m.level = at.level;
      m.dtype = r.dtype;
      m.world = world;
      m.nodes = at.nodes;
      m.bytes = r.bytes;
      m.in_place = half == 1;
      m.time_s = x.time_s;
      m.busbw_gbs = x.busbw;
      m.cv = NAN;  // nccl-tests prints the mean of its iterations, not their spread
      m.repeats = h.repeats;
      m.status = x.wrong ? "error" : "ok";
      m.source = name;
      out.push_back(std::move(m));
    }
  }
  SCALEDL_CHECK(
      !out.empty(),
      "{}: all {} rows (out-of-place + in-place) contradict the file's own bandwidth columns, e.g. {}: "
      "refusing the file",
      name, n_halves, first_refused);
  if (refused && n_refused) {
    refused->rows += n_refused;
    refused->notes.push_back(
        fmt::format("{}: {} of {} rows (out-of-place + in-place) refused: their time contradicts "
                    "the file's own bandwidth columns, e.g. {}",
                    name, n_refused, n_halves, first_refused));
  }
  return out;
}

std::vector<CollectiveMeasurement> parse_nccl_tests_file(const std::string& path,
                                                         const NcclTestsImportOptions& o,
                                                         NcclTestsRefused* refused) {
  std::error_code ec;
  SCALEDL_CHECK(std::filesystem::exists(path, ec), "{}: no such file", path);
  SCALEDL_CHECK(!std::filesystem::is_directory(path, ec),
                "{}: is a directory, expected an nccl-tests output file", path);
  std::ifstream f(path, std::ios::binary);
  SCALEDL_CHECK(f.good(), "{}: cannot open", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_nccl_tests_text(ss.str(), path, o, refused);
}

nlohmann::json CollectiveImportSummary::to_json() const {
  return {{"files", files},          {"rows", rows},
          {"inserted", inserted},    {"duplicates", rows - inserted},
          {"refused", refused.rows}, {"notes", refused.notes}};
}

CollectiveImportSummary import_nccl_tests(const std::vector<std::string>& files,
                                          const NcclTestsImportOptions& o, const std::string& db) {
  o.validate();
  SCALEDL_CHECK(!files.empty(), "no files to import: name nccl-tests output files");
  std::vector<CollectiveMeasurement> all;
  CollectiveImportSummary s;
  for (const auto& f : files) {
    auto rows = parse_nccl_tests_file(f, o, &s.refused);
    all.insert(all.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  s.files = files.size();
  s.rows = all.size();
  Store store(db);
  s.inserted = store.put_collectives(all);
  return s;
}

}  // namespace scaledl
