// The throughput model of the input pipeline (pipeline.hpp; ORION §3.3-3.4,
// docs/pipeline.md) and the report's JSON form.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/pipeline/pipeline.hpp"

namespace scaledl {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Per-sample time at `size` relative to the measured size: t(size) / t(measured).
double time_factor(const ThroughputModel& m, int64_t size) {
  const double r = static_cast<double>(size) / static_cast<double>(m.sample_size);
  const double grow = m.kind == InputKind::Image ? r * r : r;  // pixels of the output / tokens per sample
  const double t0 = m.fixed_ms + m.scaled_ms;
  return t0 > 0 ? (m.fixed_ms + m.scaled_ms * grow) / t0 : 1.0;
}

nlohmann::json num_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

}  // namespace

ThroughputModel ThroughputModel::fit(const PipelineMeasurement& m, const StorageMeasurement* storage,
                                     const HostInfo& host) {
  ThroughputModel t;
  t.kind = m.kind;
  t.sample_size = m.sample_size;
  t.host = host.key();
  t.measured_vcpus = std::max(host.vcpus, 1);
  const WorkerPoint* one = nullptr;
  for (const auto& p : m.points) {
    if (p.workers == 1) one = &p;
    t.max_measured_workers = std::max(t.max_measured_workers, p.workers);
  }
  SCALEDL_CHECK(one != nullptr && one->samples_per_s > 0, "{} pipeline: no W = 1 measurement to fit from",
                to_string(m.kind));
  SCALEDL_CHECK(m.sample_size >= 1, "{} pipeline: sample_size={} must be >= 1", to_string(m.kind),
                m.sample_size);
  t.r1 = one->samples_per_s;
  // Linearised USL over 2 <= W <= vCPUs (beyond the vCPUs the workers only time-share):
  //   y = W R1 / R(W) - 1 = alpha x1 + beta x2,  x1 = W - 1, x2 = W (W - 1).
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  std::vector<int> ws;
  for (const auto& p : m.points) {
    if (p.workers < 2 || p.workers > t.measured_vcpus || !(p.samples_per_s > 0)) continue;
    const double W = p.workers, y = W * t.r1 / p.samples_per_s - 1, x1 = W - 1, x2 = W * (W - 1);
    s11 += x1 * x1, s12 += x1 * x2, s22 += x2 * x2, s1y += x1 * y, s2y += x2 * y;
    if (std::find(ws.begin(), ws.end(), p.workers) == ws.end()) ws.push_back(p.workers);
  }
  if (ws.size() >= 2) {
    const double det = s11 * s22 - s12 * s12;
    if (det > 0) {
      t.alpha = (s1y * s22 - s2y * s12) / det;
      t.beta = (s11 * s2y - s12 * s1y) / det;
    }
    if (!(t.beta >= 0)) {  // coherency cannot speed things up: refit contention alone
      t.beta = 0;
      t.alpha = s1y / s11;
    }
  } else if (!ws.empty()) {
    t.alpha = s1y / s11;
  }
  // alpha > 1 would mean W = 2 is slower than W = 1 (a loaded machine): read as no gain.
  t.alpha = std::clamp(std::isfinite(t.alpha) ? t.alpha : 0.0, 0.0, 1.0);
  t.beta = std::max(std::isfinite(t.beta) ? t.beta : 0.0, 0.0);
  if (m.kind == InputKind::Image) {
    t.fixed_ms = m.read_ms + m.decode_ms;
    t.scaled_ms = m.transform_ms;
  } else {
    t.fixed_ms = 0;
    t.scaled_ms = m.read_ms + m.decode_ms + m.transform_ms;
  }
  if (!(t.fixed_ms + t.scaled_ms > 0)) t.scaled_ms = 1e3 / t.r1;  // a description without the stage split
  t.bytes_per_sample = std::max(m.bytes_per_sample, 0.0);
  t.read_Bps = storage && storage->read_Bps > 0 ? storage->read_Bps : 0;
  return t;
}

double ThroughputModel::cpu_rate(int64_t workers, int64_t vcpus, int64_t size) const {
  const double w = static_cast<double>(std::min(workers, vcpus));
  const double usl = w * r1 / (1 + alpha * (w - 1) + beta * w * (w - 1));
  return usl / time_factor(*this, size);
}

double ThroughputModel::storage_rate(int64_t size) const {
  double bytes = bytes_per_sample;
  if (kind == InputKind::Text) bytes *= static_cast<double>(size) / static_cast<double>(sample_size);
  return read_Bps > 0 && bytes > 0 ? read_Bps / bytes : kInf;
}

nlohmann::json ThroughputModel::to_json() const {
  return {{"kind", to_string(kind)},
          {"sample_size", sample_size},
          {"r1_samples_per_s", r1},
          {"alpha", alpha},
          {"beta", beta},
          {"fixed_ms", fixed_ms},
          {"scaled_ms", scaled_ms},
          {"bytes_per_sample", bytes_per_sample},
          {"read_Bps", read_Bps > 0 ? nlohmann::json(read_Bps) : nlohmann::json()},
          {"measured_vcpus", measured_vcpus},
          {"max_measured_workers", max_measured_workers},
          {"host", host},
          {"source", source}};
}

InputPrediction predict_input(const ThroughputModel& m, int64_t workers, int64_t vcpus, int64_t sample_size) {
  SCALEDL_CHECK(workers >= 1 && workers <= 4096,
                "--workers={} must be in [1, 4096] (input worker threads per host)", workers);
  SCALEDL_CHECK(vcpus >= 1 && vcpus <= 4096, "--vcpus={} must be in [1, 4096] (vCPUs of each host)", vcpus);
  SCALEDL_CHECK(sample_size >= 1, "{}={} must be >= 1", m.kind == InputKind::Text ? "--seq" : "--image",
                sample_size);
  InputPrediction p;
  p.workers = workers;
  p.vcpus = vcpus;
  p.sample_size = sample_size;
  p.cpu_samples_per_s = m.cpu_rate(workers, vcpus, sample_size);
  p.storage_samples_per_s = m.storage_rate(sample_size);
  p.samples_per_s = std::min(p.cpu_samples_per_s, p.storage_samples_per_s);
  p.limit = p.storage_samples_per_s < p.cpu_samples_per_s ? "storage" : "cpu";
  p.extrapolated = std::min(workers, vcpus) > m.max_measured_workers;
  return p;
}

nlohmann::json IterationBound::to_json() const {
  return {{"t_compute_ms", t_compute_ms},
          {"t_input_ms", t_input_ms},
          {"samples_per_iter", samples_per_iter},
          {"t_iter_ms", t_iter_ms},
          {"bottleneck", bottleneck}};
}

std::pair<double, double> input_interval_ms(double t_input_ms, double level) {
  SCALEDL_CHECK(level == 0.80 || level == 0.95, "input_interval_ms: level {} is not 0.80 or 0.95", level);
  const double e = level == 0.80 ? 0.115 : 0.33;
  return {t_input_ms / (1 + e), t_input_ms * (1 + e)};
}

IterationBound bound_iteration(double t_compute_ms, double samples_per_iter, const InputPrediction& in) {
  SCALEDL_CHECK(in.samples_per_s > 0, "input pipeline: {} samples/s is not a rate", in.samples_per_s);
  IterationBound b;
  b.t_compute_ms = t_compute_ms;
  b.samples_per_iter = samples_per_iter;
  b.t_input_ms = 1e3 * samples_per_iter / in.samples_per_s;
  b.t_iter_ms = std::max(t_compute_ms, b.t_input_ms);
  b.bottleneck = b.t_input_ms > t_compute_ms ? "input" : "compute";
  return b;
}

// ---- JSON --------------------------------------------------------------------------

nlohmann::json PipelineReport::to_json() const {
  nlohmann::json pipes = nlohmann::json::array();
  for (const auto& m : pipelines) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& p : m.points)
      pts.push_back({{"workers", p.workers},
                     {"samples_per_s", p.samples_per_s},
                     {"cv", p.cv},
                     {"repeats", p.repeats},
                     {"samples", p.samples},
                     {"foreign_vcpus", p.foreign_vcpus},
                     {"status", p.status},
                     {"runs", p.runs}});
    nlohmann::json j = {{"kind", to_string(m.kind)},
                        {"sample_size", m.sample_size},
                        {"data", m.data},
                        {"items", m.items},
                        {"skipped", m.skipped},
                        {"skipped_files", m.skipped_files},
                        {"bytes_per_sample", m.bytes_per_sample},
                        {"read_ms", m.read_ms},
                        {"decode_ms", m.decode_ms},
                        {"transform_ms", m.transform_ms},
                        {"points", pts}};
    if (!m.points.empty()) {
      const ThroughputModel t = ThroughputModel::fit(m, storage ? &*storage : nullptr, host);
      j["model"] = t.to_json();
      nlohmann::json pred = nlohmann::json::array();
      for (const auto& p : m.points) {
        const InputPrediction ip = predict_input(t, p.workers, host.vcpus, m.sample_size);
        pred.push_back({{"workers", p.workers},
                        {"cpu_samples_per_s", ip.cpu_samples_per_s},
                        {"storage_samples_per_s", num_or_null(ip.storage_samples_per_s)},
                        {"samples_per_s", ip.samples_per_s},
                        {"limit", ip.limit}});
      }
      j["predicted"] = pred;
    }
    pipes.push_back(j);
  }
  nlohmann::json j = {{"format", "scaledl-pipeline"},
                      {"version", 1},
                      {"host", {{"cpu", host.cpu}, {"vcpus", host.vcpus}}},
                      {"options", options.is_null() ? nlohmann::json::object() : options},
                      {"pipelines", pipes}};
  if (storage)
    j["storage"] = {{"path", storage->path},
                    {"bytes", storage->bytes},
                    {"read_Bps", storage->read_Bps},
                    {"cv", storage->cv},
                    {"repeats", storage->repeats},
                    {"cache_dropped", storage->cache_dropped},
                    {"resident_before", storage->resident_before},
                    {"runs", storage->runs}};
  else
    j["storage"] = nullptr;
  return j;
}

PipelineReport PipelineReport::from_json(const nlohmann::json& j, const std::string& where) {
  SCALEDL_CHECK(j.is_object(), "{}: not a pipeline description (a JSON object with \"pipelines\")", where);
  if (j.contains("format"))
    SCALEDL_CHECK(j["format"] == "scaledl-pipeline", "{}: format={} is not \"scaledl-pipeline\"", where,
                  show(j["format"]));
  if (j.contains("version")) {
    const int64_t v = get_int(j, "version", where, 0, 1000);
    SCALEDL_CHECK(v == 1, "{}: version={} but this build reads 1", where, v);
  }
  SCALEDL_CHECK(j.contains("pipelines") && j["pipelines"].is_array(),
                "{}: \"pipelines\" (an array) is missing", where);
  PipelineReport r;
  r.host.cpu = "unknown";
  r.host.vcpus = 0;
  if (j.contains("host") && !j["host"].is_null()) {
    const auto& h = j["host"];
    SCALEDL_CHECK(h.is_object(), "{}: host={} is not an object", where, show(h));
    r.host.cpu = get_str_or(h, "cpu", where + ":host", "unknown");
    r.host.vcpus = static_cast<int>(get_int_or(h, "vcpus", where + ":host", 1, 4096, 0));
  }
  if (j.contains("options")) r.options = j["options"];
  int max_w = 1;
  for (size_t i = 0; i < j["pipelines"].size(); ++i) {
    const auto& pj = j["pipelines"][i];
    const std::string ctx = fmt::format("{}:pipelines[{}]", where, i);
    SCALEDL_CHECK(pj.is_object(), "{}: not an object", ctx);
    PipelineMeasurement m;
    SCALEDL_CHECK(pj.contains("kind") && pj["kind"].is_string(), "{}: \"kind\" (text or image) is missing",
                  ctx);
    m.kind = parse_input_kind(pj["kind"].get<std::string>(), ctx + ".kind");
    m.sample_size = get_int(pj, "sample_size", ctx, 1, int64_t{1} << 24);
    m.data = get_str_or(pj, "data", ctx, "");
    m.items = get_int_or(pj, "items", ctx, 0, int64_t{1} << 50, 0);
    m.skipped = get_int_or(pj, "skipped", ctx, 0, int64_t{1} << 50, 0);
    m.bytes_per_sample = get_num_or(pj, "bytes_per_sample", ctx, 0, 1e15, 0);
    m.read_ms = get_num_or(pj, "read_ms", ctx, 0, 1e9, 0);
    m.decode_ms = get_num_or(pj, "decode_ms", ctx, 0, 1e9, 0);
    m.transform_ms = get_num_or(pj, "transform_ms", ctx, 0, 1e9, 0);
    if (pj.contains("skipped_files") && pj["skipped_files"].is_array())
      for (const auto& s : pj["skipped_files"])
        if (s.is_string()) m.skipped_files.push_back(s.get<std::string>());
    SCALEDL_CHECK(pj.contains("points") && pj["points"].is_array() && !pj["points"].empty(),
                  "{}: \"points\" (an array of {{workers, samples_per_s}}) is missing or empty", ctx);
    for (size_t k = 0; k < pj["points"].size(); ++k) {
      const auto& q = pj["points"][k];
      const std::string pc = fmt::format("{}.points[{}]", ctx, k);
      SCALEDL_CHECK(q.is_object(), "{}: not an object", pc);
      WorkerPoint p;
      p.workers = static_cast<int>(get_int(q, "workers", pc, 1, 4096));
      p.samples_per_s = get_num_or(q, "samples_per_s", pc, 1e-9, 1e15, -1);
      SCALEDL_CHECK(p.samples_per_s > 0, "{}: samples_per_s is missing (a rate > 0)", pc);
      p.cv = get_num_or(q, "cv", pc, 0, 1e6, 0);
      p.repeats = static_cast<int>(get_int_or(q, "repeats", pc, 0, 1 << 30, 0));
      p.samples = get_int_or(q, "samples", pc, 0, int64_t{1} << 50, 0);
      p.status = get_str_or(q, "status", pc, "ok");
      p.foreign_vcpus = get_num_or(q, "foreign_vcpus", pc, 0, 1e6, 0);
      max_w = std::max(max_w, p.workers);
      m.points.push_back(p);
    }
    std::sort(m.points.begin(), m.points.end(),
              [](const WorkerPoint& a, const WorkerPoint& b) { return a.workers < b.workers; });
    r.pipelines.push_back(std::move(m));
  }
  if (r.host.vcpus == 0) r.host.vcpus = max_w;  // a hand-written description: the measured W were all usable
  if (j.contains("storage") && !j["storage"].is_null()) {
    const auto& sj = j["storage"];
    const std::string ctx = where + ":storage";
    SCALEDL_CHECK(sj.is_object(), "{}: not an object", ctx);
    StorageMeasurement s;
    s.path = get_str_or(sj, "path", ctx, "");
    s.read_Bps = get_num_or(sj, "read_Bps", ctx, 1, 1e15, -1);
    SCALEDL_CHECK(s.read_Bps > 0, "{}: read_Bps (bytes/s > 0) is missing", ctx);
    s.bytes = get_num_or(sj, "bytes", ctx, 0, 1e18, 0);
    s.cv = get_num_or(sj, "cv", ctx, 0, 1e6, 0);
    s.repeats = static_cast<int>(get_int_or(sj, "repeats", ctx, 0, 1 << 30, 0));
    s.cache_dropped = get_bool_or(sj, "cache_dropped", ctx, false);
    s.resident_before = get_num_or(sj, "resident_before", ctx, 0, 1, 0);
    r.storage = s;
  }
  return r;
}

ThroughputModel load_throughput_model(const std::string& path, InputKind kind, const std::string& key) {
  std::ifstream f(path, std::ios::binary);
  SCALEDL_CHECK(f.good(),
                "{}={}: cannot open (a `scaledl bench pipeline --out` JSON or a store with pipeline rows)",
                key, path);
  char head[16] = {};
  f.read(head, sizeof(head));
  f.close();
  PipelineReport r;
  if (std::string(head, 15) == "SQLite format 3") {
    Store s(path, /*read_only=*/true);
    r = pipeline_rows(s);
  } else {
    r = PipelineReport::from_json(read_json_file(path), key + "=" + path);
  }
  for (const auto& m : r.pipelines) {
    if (m.kind != kind) continue;
    ThroughputModel t = ThroughputModel::fit(m, r.storage ? &*r.storage : nullptr, r.host);
    t.source = path;
    return t;
  }
  fail("{}={} holds no {} pipeline measurement (run `scaledl bench pipeline --input {}`)", key, path,
       to_string(kind), to_string(kind));
}

}  // namespace scaledl
