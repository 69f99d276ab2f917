// NeuSight artifact importer (see neusight.hpp for the shape mapping).
#include "scaledl/learn/neusight.hpp"
#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11, bundled by LibTorch 2.x)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device.hpp"

namespace scaledl {

namespace fs = std::filesystem;

namespace {

/// Sorted list of *.csv / *.json files in `dir` (empty when dir is absent).
std::vector<std::string> files_in(const fs::path& dir, const std::string& ext) {
  std::vector<std::string> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// Every CSV of the artifact: ops/<op>/*.csv then ops-transformer-shapes/*.csv.
std::vector<std::string> artifact_csvs(const std::string& root, bool transformer_shapes) {
  std::vector<std::string> out;
  const fs::path ops = fs::path(root) / "ops";
  if (fs::is_directory(ops)) {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(ops))
      if (e.is_directory()) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs)
      for (auto& f : files_in(d, ".csv")) out.push_back(f);
  }
  if (transformer_shapes)
    for (auto& f : files_in(fs::path(root) / "ops-transformer-shapes", ".csv")) out.push_back(f);
  return out;
}

double parse_double(const std::string& s, const std::string& where, const char* col) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  SCALEDL_CHECK(!s.empty() && end && *end == '\0', "{}: {}=\"{}\" is not a number", where, col, s);
  return v;
}

int64_t parse_dim(const std::string& s, const std::string& where, const char* col) {
  double v = parse_double(s, where, col);  // "1024" or "1024.0"
  SCALEDL_CHECK(v >= 1 && v < 1e12 && v == std::floor(v), "{}: {}={} must be a positive integer", where, col,
                s);
  return static_cast<int64_t>(v);
}

/// The artifact's trace CSV reduced to what read_neusight_trace reads: Name, op,
/// kernel, input_shapes, output_shape, fw_latency, bw_latency of the nodes with a
/// positive time.
std::string compact_trace(const std::string& path) {
  const auto recs = parse_csv(read_text_file(path), path);
  SCALEDL_CHECK(!recs.empty(), "{}: empty file", path);
  const auto& h = recs[0];
  const int c_name = csv_column(h, "Name"), c_op = csv_column(h, "op"), c_t = csv_column(h, "target"),
            c_meta = csv_column(h, "meta"), c_in = csv_column(h, "input_shapes"),
            c_out = csv_column(h, "output_shape"), c_fw = csv_column(h, "fw_latency"),
            c_bw = csv_column(h, "bw_latency");
  SCALEDL_CHECK(
      c_name >= 0 && c_op >= 0 && c_t >= 0 && c_meta >= 0 && c_in >= 0 && c_out >= 0 && c_fw >= 0 &&
          c_bw >= 0,
      "{}:1: header lacks a column of the NeuSight trace format (Name, op, target, meta, input_shapes, "
      "output_shape, fw_latency, bw_latency)",
      path);
  std::string text = "Name,op,kernel,input_shapes,output_shape,fw_latency,bw_latency\n";
  for (size_t r = 1; r < recs.size(); ++r) {
    const auto& f = recs[r];
    SCALEDL_CHECK(f.size() == h.size(), "{}: record {} has {} fields, header {}", path, r, f.size(),
                  h.size());
    const double fw = f[c_fw].empty() ? 0 : parse_double(f[c_fw], path, "fw_latency");
    const double bw = f[c_bw].empty() ? 0 : parse_double(f[c_bw], path, "bw_latency");
    if (!(fw > 0 || bw > 0)) continue;
    text += fmt::format("{},{},{},{},{},{},{}\n", csv_field(f[c_name]), f[c_op],
                        csv_field(neusight_trace_kernel(f[c_op], f[c_t], f[c_meta])), csv_field(f[c_in]),
                        csv_field(f[c_out]), f[c_fw], f[c_bw]);
  }
  return text;
}

}  // namespace

nlohmann::json NeusightImportSummary::to_json() const {
  return {{"files", files},
          {"rows", rows},
          {"mapped", mapped},
          {"inserted", inserted},
          {"duplicates", mapped - inserted},
          {"devices", devices},
          {"per_type", per_type},
          {"skipped", skipped},
          {"labels", labels.to_json()},
          {"traces", traces.to_json()},
          {"seconds", seconds}};
}

int csv_column(const std::vector<std::string>& header, const std::string& name) {
  auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : static_cast<int>(it - header.begin());
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text, const std::string& ctx,
                                                std::vector<size_t>* first_line) {
  std::vector<std::vector<std::string>> recs;
  std::vector<std::string> rec;
  std::string field;
  size_t line = 1, rec_line = 1;
  bool in_quotes = false, any = false;
  const size_t n = text.size();
  auto end_record = [&] {
    rec.push_back(std::move(field));
    field.clear();
    if (!(rec.size() == 1 && rec[0].empty())) {  // skip blank lines
      recs.push_back(std::move(rec));
      if (first_line) first_line->push_back(rec_line);
    }
    rec.clear();
    any = false;
  };
  size_t quote_line = 0;
  // A UTF-8 byte-order mark (spreadsheet exports write one) is not part of the first field.
  const size_t start = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  for (size_t i = start; i < n; ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < n && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (!any) rec_line = line;
    any = true;
    if (c == '"') {
      SCALEDL_CHECK(field.empty(), "{}:{}: quote inside an unquoted field", ctx, line);
      in_quotes = true;
      quote_line = line;
    } else if (c == ',') {
      rec.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      end_record();
      ++line;
    } else if (c != '\r') {
      field += c;
    }
  }
  SCALEDL_CHECK(!in_quotes, "{}:{}: unterminated quoted field", ctx, quote_line);
  if (any) end_record();
  return recs;
}

std::vector<LayerMeasurement> read_neusight_csv(const std::string& path, const std::string& campaign,
                                                const std::map<std::string, std::string>& device_names,
                                                NeusightImportSummary& summary) {
  std::vector<size_t> lines;
  const auto recs = parse_csv(read_text_file(path), path, &lines);
  SCALEDL_CHECK(!recs.empty(), "{}: empty file (expected a header line)", path);
  const auto& h = recs[0];
  const int c_op = csv_column(h, "OPName"), c_lat = csv_column(h, "Latency"), c_dev = csv_column(h, "Device");
  SCALEDL_CHECK(c_op >= 0 && c_lat >= 0 && c_dev >= 0,
                "{}:1: header lacks OPName, Latency or Device: not a NeuSight ops CSV", path);
  const int cB = csv_column(h, "B"), cM = csv_column(h, "M"), cN = csv_column(h, "N"),
            cK = csv_column(h, "K"), cH = csv_column(h, "H");
  // Optional columns of our own measurements (scripts/gpu/neusight_ops_bench.py --dtype/--backward):
  // the dtype (default fp32, the artifact's) and the backward time of the same op, ms.
  const int c_dtype = csv_column(h, "DType"), c_bwd = csv_column(h, "BwdLatency");
  ++summary.files;
  std::vector<LayerMeasurement> out;
  out.reserve(recs.size());
  for (size_t r = 1; r < recs.size(); ++r) {
    const auto& f = recs[r];
    const std::string where = fmt::format("{}:{}", path, lines[r]);
    SCALEDL_CHECK(f.size() == h.size(), "{}: {} fields, header has {}", where, f.size(), h.size());
    ++summary.rows;
    const std::string& op = f[c_op];
    auto need = [&](int c, const char* name) {
      SCALEDL_CHECK(c >= 0, "{}: op {} needs column {} which the header lacks", where, op, name);
      return parse_dim(f[c], where, name);
    };
    // Each dim is < 1e12: their product could overflow int64.
    auto product = [&](int ca, const char* a, int cb, const char* b) {
      const int64_t x = need(ca, a), y = need(cb, b);
      SCALEDL_CHECK(x <= INT64_MAX / y, "{}: {} x {} = {} x {} is too large", where, a, b, x, y);
      return x * y;
    };
    LayerMeasurement m;
    if (op == "linear") {
      m.type = LayerType::Linear;
      m.dims = {product(cB, "B", cM, "M"), need(cN, "N"), need(cK, "K"), 1};
    } else if (op == "bmm") {
      m.type = LayerType::BMM;
      m.dims = {need(cB, "B"), need(cM, "M"), need(cN, "N"), need(cK, "K")};
    } else if (op == "ln" || op == "softmax") {
      m.type = op == "ln" ? LayerType::LayerNorm : LayerType::Softmax;
      m.dims = {need(cB, "B"), need(cH, "H")};
    } else if (op == "add" || op == "mul" || op == "relu" || op == "gelu") {
      m.type = op == "add"    ? LayerType::Add
               : op == "mul"  ? LayerType::Mul
               : op == "relu" ? LayerType::ReLU
                              : LayerType::GELU;
      m.dims = {product(cB, "B", cH, "H")};
    } else if (op == "addu" || op == "mulu" || op == "divu" || op == "powu" || op == "tanh") {
      m.type =
          LayerType::Pointwise;  // one tensor and a scalar; pow and tanh save a tensor for their backward
      m.dims = {product(cB, "B", cH, "H"), op == "powu" || op == "tanh" ? 1 : 0};
    } else {
      SCALEDL_CHECK(!op.empty(), "{}: OPName is empty", where);
      ++summary.skipped[op];
      continue;
    }
    const double lat = parse_double(f[c_lat], where, "Latency");
    SCALEDL_CHECK(std::isfinite(lat) && lat > 0, "{}: Latency={} must be > 0 ms", where, f[c_lat]);
    auto dn = device_names.find(f[c_dev]);
    SCALEDL_CHECK(dn != device_names.end(), "{}: Device=\"{}\" has no device_configs/*.json entry", where,
                  f[c_dev]);
    try {
      validate_dims(m.type, m.dims);
    } catch (const Error& e) {
      fail("{}: {}", where, e.what());
    }
    m.campaign = campaign;
    m.dtype = DType::FP32;
    if (c_dtype >= 0) {
      try {
        m.dtype = parse_dtype(f[c_dtype], "DType");
      } catch (const Error& e) {
        fail("{}: {}", where, e.what());
      }
    }
    m.device = dn->second;
    m.source = "neusight";
    m.fwd.median_ms = lat;
    m.fwd.n = 5;  // mean of the fastest 5 of 25 runs (artifact README)
    if (c_bwd >= 0 && !f[c_bwd].empty()) {
      const double bwd = parse_double(f[c_bwd], where, "BwdLatency");
      SCALEDL_CHECK(std::isfinite(bwd) && bwd > 0, "{}: BwdLatency={} must be > 0 ms (or empty)", where,
                    f[c_bwd]);
      m.bwd.median_ms = bwd;
      m.bwd.n = 5;
    }
    ++summary.mapped;
    ++summary.per_type[to_string(m.type)];
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

/// Facts about the GPUs that their NeuSight spec sheets (device_configs/*.json) lack, from
/// `<root>/device_facts.json` when present (ours, not the artifact's: datasets/neusight/README.md):
///   {"about": "...", "devices": {"<Device>": {"compute_capability": "7.5",
///    "sustained_clock_mhz": 900, "sustained_clock_source": "..."}}}
/// compute_capability goes to extra.compute_capability (as a probe writes it), the sustained
/// clock to DeviceRecord::sustained_clock_mhz with its source in extra.sustained_clock. An
/// unknown key, a device without a spec sheet, a clock above the boost clock or one without
/// a source is an Error, and nothing is imported.
void apply_device_facts(const fs::path& path, std::vector<DeviceRecord>& devices) {
  if (!fs::exists(path)) return;
  const json facts = read_json_file(path.string());
  const std::string ctx = path.string();
  SCALEDL_CHECK(facts.is_object() && facts.contains("devices") && facts.at("devices").is_object(),
                "{}: expected {{\"devices\": {{\"<Device>\": {{...}}}}}}", ctx);
  for (const auto& [key, v] : facts.items())
    SCALEDL_CHECK(key == "about" || key == "devices", "{}.{} is not a key of device facts (about, devices)",
                  ctx, key);
  for (const auto& item : facts.at("devices").items()) {
    const std::string name =
        item.key();  // a plain variable: C++17 lambdas cannot capture structured bindings
    const json& f = item.value();
    const std::string where = fmt::format("{}: devices.\"{}\"", ctx, name);
    auto d =
        std::find_if(devices.begin(), devices.end(), [&](const DeviceRecord& r) { return r.name == name; });
    SCALEDL_CHECK(d != devices.end(), "{} has no device_configs/*.json entry", where);
    SCALEDL_CHECK(f.is_object(), "{}: expected an object", where);
    for (const auto& [key, v] : f.items())
      SCALEDL_CHECK(
          key == "compute_capability" || key == "sustained_clock_mhz" || key == "sustained_clock_source",
          "{}.{} is not a device fact (known: compute_capability, sustained_clock_mhz, "
          "sustained_clock_source)",
          where, key);
    if (f.contains("compute_capability")) {
      const std::string cc = get_str_or(f, "compute_capability", where, "");
      SCALEDL_CHECK(compute_capability_of(cc) > 0, "{}.compute_capability=\"{}\" is not MAJOR.MINOR", where,
                    cc);
      d->extra["compute_capability"] = cc;
    }
    const double mhz = get_num_or(f, "sustained_clock_mhz", where, 1, 1e5, 0);
    if (mhz > 0) {
      const std::string source = get_str_or(f, "sustained_clock_source", where, "");
      SCALEDL_CHECK(!source.empty(), "{}.sustained_clock_source is missing: say where the clock comes from",
                    where);
      SCALEDL_CHECK(d->clock_mhz > 0 && mhz <= d->clock_mhz,
                    "{}.sustained_clock_mhz={} must be at most the spec sheet's boost clock ({} MHz)", where,
                    mhz, d->clock_mhz);
      d->sustained_clock_mhz = mhz;
      d->extra["sustained_clock"] = source;
    }
  }
}

}  // namespace

NeusightImportSummary import_neusight(const NeusightImportOptions& o, Store& store) {
  const auto t0 = std::chrono::steady_clock::now();
  SCALEDL_CHECK(fs::is_directory(o.root), "--root={}: not a directory", o.root);
  NeusightImportSummary s;
  std::map<std::string, std::string> names;  // CSV "Device" -> store key
  const auto cfgs = files_in(fs::path(o.root) / "device_configs", ".json");
  SCALEDL_CHECK(!cfgs.empty(), "{}/device_configs: no device JSON files", o.root);
  // One transaction: a bad row anywhere leaves the store as it was.
  Store::Transaction tx(store);
  std::vector<DeviceRecord> devices;
  for (const auto& f : cfgs) devices.push_back(load_device_spec(f));
  apply_device_facts(fs::path(o.root) / "device_facts.json", devices);
  for (const auto& d : devices) {
    store.put_device(d);
    names[d.name] = d.key();
    ++s.devices;
  }
  const auto csvs = artifact_csvs(o.root, o.transformer_shapes);
  SCALEDL_CHECK(!csvs.empty(), "{}: no ops/<op>/*.csv files", o.root);
  for (const auto& f : csvs) {
    auto rows = read_neusight_csv(f, o.campaign, names, s);
    s.inserted += store.put_layers(rows);
  }
  s.labels = import_neusight_labels(o.root, o.campaign + "-labels", store, names);
  if (o.traces) {
    // labels/<GPU>/<label>.csv beside single-GPU eager labels (neusight.hpp).
    for (const auto& [dir, dev_name] : neusight_label_folders(o.root)) {
      for (const auto& f : files_in(dir, ".csv")) {
        const auto lab = parse_neusight_label_name(fs::path(f).stem().string());
        if (!lab || !lab->suffix.empty()) continue;
        auto dn = names.find(dev_name);
        SCALEDL_CHECK(dn != names.end(),
                      "{}: device \"{}\" (from the folder name) has no device_configs/*.json entry", f,
                      dev_name);
        s.traces.inserted +=
            store.put_layers(read_neusight_trace(f, o.campaign + "-traces", dn->second, s.traces));
      }
    }
  }
  tx.commit();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

size_t write_neusight_subset(const std::string& root, const std::string& out_dir, size_t rows_per_group) {
  SCALEDL_CHECK(rows_per_group >= 2, "rows_per_group={} must be >= 2", rows_per_group);
  SCALEDL_CHECK(fs::is_directory(root), "--root={}: not a directory", root);
  const std::vector<std::string> keep = {"OPName", "Latency", "Device", "B", "M", "N", "K", "H"};
  size_t written = 0;
  for (const auto& path : artifact_csvs(root, true)) {
    const auto recs = parse_csv(read_text_file(path), path);
    SCALEDL_CHECK(!recs.empty(), "{}: empty file", path);
    std::vector<int> cols;
    std::vector<std::string> names;
    for (const auto& k : keep)
      if (int c = csv_column(recs[0], k); c >= 0) {
        cols.push_back(c);
        names.push_back(k);
      }
    const int c_op = csv_column(recs[0], "OPName"), c_lat = csv_column(recs[0], "Latency");
    SCALEDL_CHECK(c_op >= 0 && c_lat >= 0, "{}: header lacks OPName or Latency", path);
    std::map<std::string, std::vector<std::pair<double, size_t>>> groups;  // op -> (latency, record)
    for (size_t r = 1; r < recs.size(); ++r) {
      SCALEDL_CHECK(recs[r].size() == recs[0].size(), "{}: record {} has {} fields, header {}", path, r,
                    recs[r].size(), recs[0].size());
      groups[recs[r][c_op]].push_back({parse_double(recs[r][c_lat], path, "Latency"), r});
    }
    std::string text = fmt::format("{}\n", fmt::join(names, ","));
    for (auto& [op, v] : groups) {
      std::sort(v.begin(), v.end());
      std::set<size_t> pick;  // evenly spaced latency quantiles, fastest and slowest included
      const size_t k = std::min(rows_per_group, v.size());
      for (size_t i = 0; i < k; ++i) pick.insert(k == 1 ? 0 : i * (v.size() - 1) / (k - 1));
      for (size_t i : pick) {
        const auto& rec = recs[v[i].second];
        std::vector<std::string> f;
        for (int c : cols) f.push_back(rec[c]);
        text += fmt::format("{}\n", fmt::join(f, ","));
        ++written;
      }
    }
    const fs::path rel = fs::relative(path, root);
    const fs::path dst = fs::path(out_dir) / rel;
    fs::create_directories(dst.parent_path());
    write_text_file_atomic(dst.string(), text);
  }
  fs::create_directories(fs::path(out_dir) / "device_configs");
  for (const auto& f : files_in(fs::path(root) / "device_configs", ".json"))
    fs::copy_file(f, fs::path(out_dir) / "device_configs" / fs::path(f).filename(),
                  fs::copy_options::overwrite_existing);
  // End-to-end labels, their per-node traces (compact columns) and their configs.
  const fs::path labels = fs::path(root) / "labels";
  if (fs::is_directory(labels))
    for (const auto& e : fs::directory_iterator(labels)) {
      if (!e.is_directory()) continue;
      const fs::path dst = fs::path(out_dir) / "labels" / e.path().filename();
      fs::create_directories(dst);
      for (const auto& f : files_in(e.path(), ".json"))
        fs::copy_file(f, dst / fs::path(f).filename(), fs::copy_options::overwrite_existing);
      for (const auto& f : files_in(e.path(), ".csv"))
        write_text_file_atomic((dst / fs::path(f).filename()).string(), compact_trace(f));
    }
  if (fs::is_directory(fs::path(root) / "model_configs")) {
    fs::create_directories(fs::path(out_dir) / "model_configs");
    for (const auto& f : files_in(fs::path(root) / "model_configs", ".json"))
      fs::copy_file(f, fs::path(out_dir) / "model_configs" / fs::path(f).filename(),
                    fs::copy_options::overwrite_existing);
  }
  if (fs::exists(fs::path(root) / "LICENSE"))
    fs::copy_file(fs::path(root) / "LICENSE", fs::path(out_dir) / "LICENSE",
                  fs::copy_options::overwrite_existing);
  return written;
}

}  // namespace scaledl
