// The per-node traces beside the NeuSight labels as layer rows (neusight.hpp).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/learn/neusight.hpp"

namespace scaledl {

namespace {

/// "[[8, 512, 1024], [1, 512, 1024]]" -> {{8, 512, 1024}, {1, 512, 1024}}; "(8, 512)" -> {{8, 512}}.
/// Scalars and non-tensor arguments are not listed by the tracer. A malformed
/// number => Error naming `where` and `col`.
std::vector<std::vector<int64_t>> parse_shapes(const std::string& text, const std::string& where,
                                               const char* col) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> cur;
  int depth = 0;
  std::string num;
  auto flush = [&] {
    if (num.empty()) return;
    char* end = nullptr;
    const long long v = std::strtoll(num.c_str(), &end, 10);
    SCALEDL_CHECK(end && *end == '\0' && v >= 0 && v < (1LL << 40), "{}: {}: \"{}\" is not a dimension",
                  where, col, num);
    cur.push_back(v);
    num.clear();
  };
  // The innermost bracket level holds one shape: "[[a, b], [c]]" or "(a, b)".
  int inner = 0;
  for (char c : text) inner = std::max(inner, depth += (c == '[' || c == '(') - (c == ']' || c == ')'));
  depth = 0;
  for (char c : text) {
    if (c == '[' || c == '(') {
      ++depth;
      if (depth == inner) cur.clear();
    } else if (c == ']' || c == ')') {
      flush();
      if (depth == inner) out.push_back(cur);
      --depth;
    } else if (c >= '0' && c <= '9') {
      num += c;
    } else if (c == ',' || c == ' ') {
      flush();
    } else {
      fail("{}: {}=\"{}\" is not a list of shapes", where, col, text);
    }
  }
  SCALEDL_CHECK(depth == 0, "{}: {}=\"{}\" has unbalanced brackets", where, col, text);
  return out;
}

int64_t prod(const std::vector<int64_t>& v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < v.size(); ++i) p *= v[i];
  return p;
}

struct Mapped {
  LayerType type;
  std::vector<int64_t> dims;
};

/// Kernel + shapes -> one of our layer types (neusight.hpp), or nothing.
std::optional<Mapped> map_node(const std::string& kernel, const std::vector<std::vector<int64_t>>& in,
                               const std::vector<int64_t>& outv, bool training) {
  if (outv.empty()) return std::nullopt;
  const int64_t n_out = prod(outv, 0, outv.size());
  // Dropout is a kernel in training only (the identity in eval mode, as inference labels run).
  if ((kernel == "Dropout" || kernel == "dropout") && training && in.size() == 1)
    return Mapped{LayerType::Dropout, {n_out}};
  if (kernel == "Linear" && in.size() == 1 && !in[0].empty())
    return Mapped{LayerType::Linear, {prod(in[0], 0, in[0].size() - 1), in[0].back(), outv.back(), 1}};
  if (kernel == "addmm" && in.size() == 3 && in[1].size() == 2 &&
      in[2].size() == 2)  // bias, x [t, din], w [din, dout]
    return Mapped{LayerType::Linear, {in[1][0], in[1][1], in[2][1], 1}};
  if ((kernel == "matmul" || kernel == "bmm") && in.size() == 2 && in[0].size() == in[1].size() &&
      (in[0].size() == 3 || in[0].size() == 4)) {
    const auto& a = in[0];
    const auto& b = in[1];
    const size_t r = a.size();
    if (a[r - 1] != b[r - 2]) return std::nullopt;
    return Mapped{LayerType::BMM, {prod(a, 0, r - 2), a[r - 2], a[r - 1], b[r - 1]}};
  }
  if (kernel == "LayerNorm" && in.size() == 1 && !in[0].empty())
    return Mapped{LayerType::LayerNorm, {prod(in[0], 0, in[0].size() - 1), in[0].back()}};
  if (kernel == "softmax" && in.size() == 1 && !in[0].empty())
    return Mapped{LayerType::Softmax, {prod(in[0], 0, in[0].size() - 1), in[0].back()}};
  if (kernel == "gelu" && in.size() == 1) return Mapped{LayerType::GELU, {n_out}};
  if ((kernel == "relu" || kernel == "ReLU") && in.size() == 1) return Mapped{LayerType::ReLU, {n_out}};
  if ((kernel == "add" || kernel == "mul") && in.size() == 2 && in[0] == in[1] && in[0] == outv)
    return Mapped{kernel == "add" ? LayerType::Add : LayerType::Mul, {n_out}};
  if ((kernel == "add" || kernel == "mul" || kernel == "sub" || kernel == "truediv" || kernel == "where") &&
      !in.empty() && n_out > 1)
    return Mapped{LayerType::Pointwise, {n_out, 0}};
  if ((kernel == "pow" || kernel == "tanh" || kernel == "Tanh") && in.size() == 1 && n_out > 1)
    return Mapped{LayerType::Pointwise, {n_out, 1}};
  return std::nullopt;
}

double parse_ms(const std::string& s, const std::string& where, const char* col) {
  if (s.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  SCALEDL_CHECK(end && *end == '\0' && std::isfinite(v) && v >= 0 && v < 1e8,
                "{}: {}=\"{}\" is not a time in ms", where, col, s);
  return v;
}

}  // namespace

std::string neusight_trace_kernel(const std::string& op, const std::string& target, const std::string& meta) {
  static const std::regex cls(R"(<class '([A-Za-z0-9_.]+)'>)");
  static const std::regex fn(R"(^<(?:built-in function|built-in method|function) ([A-Za-z0-9_]+))");
  if (op == "call_module") {
    std::string last;
    for (auto it = std::sregex_iterator(meta.begin(), meta.end(), cls); it != std::sregex_iterator(); ++it)
      last = (*it)[1];
    return last.empty() ? target : last.substr(last.rfind('.') + 1);
  }
  std::smatch m;
  if (op == "call_function" && std::regex_search(target, m, fn)) return m[1];
  return target;
}

nlohmann::json NeusightTraceSummary::to_json() const {
  return {{"files", files}, {"nodes", nodes},       {"mapped", mapped},  {"below_floor", below_floor},
          {"rows", rows},   {"inserted", inserted}, {"skipped", skipped}};
}

std::vector<LayerMeasurement> read_neusight_trace(const std::string& path, const std::string& campaign,
                                                  const std::string& device_key,
                                                  NeusightTraceSummary& summary) {
  std::vector<size_t> lines;
  const auto recs = parse_csv(read_text_file(path), path, &lines);
  SCALEDL_CHECK(!recs.empty(), "{}: empty file (expected a header line)", path);
  const auto& h = recs[0];
  const int c_op = csv_column(h, "op"), c_in = csv_column(h, "input_shapes"),
            c_out = csv_column(h, "output_shape"), c_fw = csv_column(h, "fw_latency"),
            c_bw = csv_column(h, "bw_latency"), c_k = csv_column(h, "kernel"), c_t = csv_column(h, "target"),
            c_meta = csv_column(h, "meta");
  SCALEDL_CHECK(
      c_op >= 0 && c_in >= 0 && c_out >= 0 && c_fw >= 0 && c_bw >= 0 && (c_k >= 0 || c_t >= 0),
      "{}:1: header lacks op, input_shapes, output_shape, fw_latency, bw_latency or kernel/target: not a "
      "NeuSight trace",
      path);
  ++summary.files;
  const auto label = parse_neusight_label_name(std::filesystem::path(path).stem().string());
  const bool training = label && label->mode != RunMode::Inference;
  // (type, dims) -> the node times of that shape, forward and backward
  std::map<std::pair<LayerType, std::vector<int64_t>>, std::pair<std::vector<double>, std::vector<double>>>
      by_shape;
  for (size_t r = 1; r < recs.size(); ++r) {
    const auto& f = recs[r];
    const std::string where = fmt::format("{}:{}", path, lines[r]);
    SCALEDL_CHECK(f.size() == h.size(), "{}: {} fields, header has {}", where, f.size(), h.size());
    const double fw = parse_ms(f[c_fw], where, "fw_latency"), bw = parse_ms(f[c_bw], where, "bw_latency");
    if (fw <= 0 && bw <= 0) continue;
    ++summary.nodes;
    const std::string kernel =
        c_k >= 0 ? f[c_k] : neusight_trace_kernel(f[c_op], f[c_t], c_meta >= 0 ? f[c_meta] : std::string());
    const auto mapped = map_node(
        kernel, parse_shapes(f[c_in], where, "input_shapes"),
        [&] {
          auto o = parse_shapes(f[c_out], where, "output_shape");
          return o.size() == 1 ? o[0] : std::vector<int64_t>{};
        }(),
        training);
    if (!mapped) {
      ++summary.skipped[kernel.empty() ? f[c_op] : kernel];
      continue;
    }
    try {
      validate_dims(mapped->type, mapped->dims);
    } catch (const Error& e) {
      fail("{}: {}", where, e.what());
    }
    ++summary.mapped;
    if (fw < kTraceMinMs) {
      ++summary.below_floor;
      continue;
    }
    auto& t = by_shape[{mapped->type, mapped->dims}];
    t.first.push_back(fw);
    if (bw >= kTraceMinMs) t.second.push_back(bw);
  }
  std::vector<LayerMeasurement> out;
  for (const auto& [key, t] : by_shape) {
    LayerMeasurement m;
    m.campaign = campaign;
    m.type = key.first;
    m.dims = key.second;
    m.dtype = DType::FP32;  // the artifact: FP32, TF32 off
    m.device = device_key;
    m.source = "neusight-trace";
    m.fwd = TimingStats::from_samples(t.first);  // the median of the nodes of this shape, and their spread
    if (!t.second.empty()) m.bwd = TimingStats::from_samples(t.second);
    out.push_back(std::move(m));
  }
  summary.rows += out.size();
  return out;
}

}  // namespace scaledl
