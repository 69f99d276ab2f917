// scaledl bench pipeline: samples/s of real host input pipelines (SentencePiece
// tokenisation, TurboJPEG decode + random-resized-crop + flip + normalise) for
// W = 1..--workers worker threads on this machine, and the read rate of a dataset
// file (issue #15; pipeline.hpp, docs/pipeline.md). Built into scaledl-pipeline,
// which `scaledl bench pipeline` runs (pipeline_forward.cpp).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "command.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/pipeline/pipeline.hpp"
#include "scaledl/pipeline/text_pipeline.hpp"  // only in scaledl-pipeline (pipeline_forward.cpp)

namespace {

struct BenchPipelineOptions {
  std::string input = "text,image";  ///< text, image or both
  std::string data = "datasets/pipeline";
  std::string corpus, tokenizer, images;  ///< "" = inside --data
  std::optional<int> workers_given;       ///< --workers: largest W (none = this host's vCPUs)
  int workers = 0;                        ///< the largest W measured
  std::string path;                       ///< file for the storage read rate ("" = not measured)
  int read_repeats = 3;
  double read_max_mb = 1024;
  std::string db, campaign = "default", out, check;
  bool json = false;
  scaledl::PipelineBenchOptions b;
};

std::string mib(double bytes) {
  return fmt::format("{:.1f} MiB", bytes / (1 << 20));
}

/// Measured (this run) against what another run's model predicts.
nlohmann::json check_against(const scaledl::PipelineReport& r, const std::string& file) {
  using namespace scaledl;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& m : r.pipelines) {
    const ThroughputModel t = load_throughput_model(file, m.kind, "--check");
    // The speedup over this run's own W = 1 takes out what moves every W alike (a
    // slower machine this minute) and checks the scaling part of the model alone.
    const double r1 = m.points.front().samples_per_s;
    const double p1 = predict_input(t, 1, r.host.vcpus, m.sample_size).samples_per_s;
    for (const auto& p : m.points) {
      const InputPrediction ip = predict_input(t, p.workers, r.host.vcpus, m.sample_size);
      const double linear = std::min<double>(p.workers, r.host.vcpus) * t.r1;
      const double sp = p.samples_per_s / r1, sp_pred = ip.samples_per_s / p1;
      rows.push_back({{"kind", to_string(m.kind)},
                      {"workers", p.workers},
                      {"measured", p.samples_per_s},
                      {"measured_cv", p.cv},
                      {"predicted", ip.samples_per_s},
                      {"error_pct", 100.0 * (ip.samples_per_s - p.samples_per_s) / p.samples_per_s},
                      {"speedup", sp},
                      {"predicted_speedup", sp_pred},
                      {"speedup_error_pct", 100.0 * (sp_pred - sp) / sp},
                      {"linear", linear},
                      {"linear_error_pct", 100.0 * (linear - p.samples_per_s) / p.samples_per_s},
                      {"limit", ip.limit}});
    }
  }
  return rows;
}

// The text report of a run: per pipeline its per-sample costs and the rates by
// worker count beside the fitted model, the storage read, the --check table.
void print_report(const BenchPipelineOptions& o, const scaledl::HostInfo& host,
                  const scaledl::PipelineReport& r, const nlohmann::json& j, size_t stored) {
  using namespace scaledl;
  std::printf("bench pipeline on %s; warm-up %.2f s, %d repeats of ~%.2f s per worker count\n",
              host.key().c_str(), o.b.warmup_s, o.b.repeats, o.b.repeat_s);
  for (size_t i = 0; i < r.pipelines.size(); ++i) {
    const auto& m = r.pipelines[i];
    const auto& pj = j["pipelines"][i];
    if (m.kind == InputKind::Text)
      std::printf(
          "\ntext   %s: %lld lines, samples of %lld tokens (%.0f bytes of text each)\n"
          "       per sample, 1 worker: tokenise %.4f ms, pack %.4f ms\n",
          m.data.c_str(), static_cast<long long>(m.items), static_cast<long long>(m.sample_size),
          m.bytes_per_sample, m.decode_ms, m.transform_ms);
    else
      std::printf(
          "\nimage  %s: %lld JPEGs (%lld corrupt, skipped), %lld x %lld output, %.0f bytes per file\n"
          "       per sample, 1 worker: read %.4f ms, decode %.4f ms, crop+resize+flip+normalise %.4f ms\n",
          m.data.c_str(), static_cast<long long>(m.items), static_cast<long long>(m.skipped),
          static_cast<long long>(m.sample_size), static_cast<long long>(m.sample_size), m.bytes_per_sample,
          m.read_ms, m.decode_ms, m.transform_ms);
    std::printf("  %7s %12s %7s %8s %10s %10s %9s\n", "workers", "samples/s", "cv", "foreign", "status",
                "speedup", "model");
    const double r1 = m.points.empty() ? 0 : m.points.front().samples_per_s;
    for (size_t k = 0; k < m.points.size(); ++k) {
      const auto& p = m.points[k];
      std::printf("  %7d %12.1f %7.3f %8.2f %10s %10.2f %9.1f\n", p.workers, p.samples_per_s, p.cv,
                  p.foreign_vcpus, p.status.c_str(), r1 > 0 ? p.samples_per_s / r1 : 0.0,
                  pj["predicted"][k]["samples_per_s"].get<double>());
    }
    const auto& t = pj["model"];
    std::printf("  model: R1 %.1f samples/s, alpha %.3f, beta %.3f (USL fitted on 2 <= W <= %d vCPUs)\n",
                t["r1_samples_per_s"].get<double>(), t["alpha"].get<double>(), t["beta"].get<double>(),
                host.vcpus);
  }
  if (r.storage) {
    const auto& s = *r.storage;
    std::printf(
        "\nstorage %s: %s read %d times, %.1f MB/s (cv %.3f); page cache %s (%.1f %% of the file resident "
        "before a read)\n",
        s.path.c_str(), mib(s.bytes).c_str(), s.repeats, s.read_Bps / 1e6, s.cv,
        s.cache_dropped ? "dropped (posix_fadvise DONTNEED)" : "NOT dropped", 100 * s.resident_before);
    if (s.resident_before > 0.05)
      std::printf(
          "warning: part of the file stayed cached: the rate is partly a memory rate, not the device's\n");
  } else {
    std::printf("\nstorage: not measured (give --path FILE)\n");
  }
  if (j.contains("check")) {
    // A markdown table: docs/results/pipeline/ quotes it as it is.
    std::printf("\ncheck against %s (its model's prediction vs this run's measurement, samples/s):\n\n",
                o.check.c_str());
    std::printf(
        "| kind | workers | measured | cv | predicted | error %% | speedup | predicted speedup | error %% | "
        "linear W x R1 | error %% | limit |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& c : j["check"]["rows"])
      std::printf("| %s | %d | %.1f | %.3f | %.1f | %+.1f | %.3f | %.3f | %+.1f | %.1f | %+.1f | %s |\n",
                  c["kind"].get<std::string>().c_str(), c["workers"].get<int>(), c["measured"].get<double>(),
                  c["measured_cv"].get<double>(), c["predicted"].get<double>(), c["error_pct"].get<double>(),
                  c["speedup"].get<double>(), c["predicted_speedup"].get<double>(),
                  c["speedup_error_pct"].get<double>(), c["linear"].get<double>(),
                  c["linear_error_pct"].get<double>(), c["limit"].get<std::string>().c_str());
  }
  if (!o.db.empty())
    std::printf("\nstore %s: %zu new pipeline rows (campaign %s)\n", o.db.c_str(), stored,
                o.campaign.c_str());
  if (!o.out.empty()) std::printf("wrote %s\n", o.out.c_str());
}

int run(BenchPipelineOptions o) {
  using namespace scaledl;
  check_output_is_not_input(o.out, "--out",
                            {{"--db", o.db},
                             {"--check", o.check},
                             {"--path", o.path},
                             {"--corpus", o.corpus},
                             {"--tokenizer", o.tokenizer}});
  const HostInfo host = host_info();
  SCALEDL_CHECK(!o.workers_given || (*o.workers_given >= 1 && *o.workers_given <= 256),
                "--workers={} must be in [1, 256]", o.workers_given.value_or(0));
  o.workers = o.workers_given ? *o.workers_given : host.vcpus;
  o.b.max_workers = o.workers;
  bool text = false, image = false;
  for (size_t a = 0; a <= o.input.size();) {
    size_t b = o.input.find(',', a);
    if (b == std::string::npos) b = o.input.size();
    const InputKind k = parse_input_kind(o.input.substr(a, b - a), "--input");
    (k == InputKind::Text ? text : image) = true;
    a = b + 1;
  }
  SCALEDL_CHECK(std::isfinite(o.read_max_mb) && o.read_max_mb >= 0.004, "--read-max-mb={} must be >= 0.004",
                o.read_max_mb);
  namespace fs = std::filesystem;
  const bool need_data = (text && (o.corpus.empty() || o.tokenizer.empty())) || (image && o.images.empty());
  if (need_data)
    SCALEDL_CHECK(fs::is_directory(o.data),
                  "--data={}: no such folder (run from the repository root, or give --data, "
                  "--corpus/--tokenizer, --images)",
                  o.data);
  o.b.corpus = o.corpus.empty() ? o.data + "/kjv-genesis-leviticus.txt" : o.corpus;
  o.b.tokenizer = o.tokenizer.empty() ? o.data + "/kjv-bpe4k.model" : o.tokenizer;
  o.b.images = o.images.empty() ? o.data + "/images" : o.images;
  // The cheap failures first: an unreadable --path before minutes of measurement.
  if (!o.path.empty()) {
    std::error_code ec;
    SCALEDL_CHECK(fs::exists(o.path, ec), "--path={}: cannot open: no such file", o.path);
  }
  if (!o.db.empty()) Store probe(o.db);  // a foreign or newer store is refused before measuring

  PipelineReport r;
  r.host = host;
  r.options = {{"workers", o.workers},
               {"tokens_per_sample", o.b.tokens_per_sample},
               {"image_size", o.b.image_size},
               {"warmup_s", o.b.warmup_s},
               {"repeats", o.b.repeats},
               {"repeat_s", o.b.repeat_s},
               {"seed", o.b.seed},
               {"max_cv", o.b.max_cv},
               {"max_foreign", o.b.max_foreign}};
  if (text) r.pipelines.push_back(bench_text_pipeline(o.b));
  if (image) r.pipelines.push_back(bench_image_pipeline(o.b));
  if (!o.path.empty())
    r.storage = measure_storage_read(o.path, o.read_repeats, o.read_max_mb * (1 << 20), "--path");

  nlohmann::json j = r.to_json();
  if (!o.check.empty()) j["check"] = {{"file", o.check}, {"rows", check_against(r, o.check)}};
  if (!o.out.empty()) write_json_file(o.out, j);
  size_t stored = 0;
  if (!o.db.empty()) {
    Store s(o.db);
    stored = put_pipeline_rows(s, o.campaign, r);
  }
  for (const auto& m : r.pipelines)
    for (const auto& f : m.skipped_files)
      std::fprintf(stderr, "warning: corrupt JPEG skipped: %s\n", f.c_str());
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  print_report(o, host, r, j, stored);
  return 0;
}

scaledl::cli::Registrar reg(
    {"bench", "pipeline"},
    "Samples/s of real input pipelines (tokenise; JPEG decode + crop + flip + normalise) per worker thread, "
    "and a "
    "file's read rate",
    [](CLI::App& app) {
      auto o = std::make_shared<BenchPipelineOptions>();
      app.add_option("--input", o->input, "text, image or text,image")->capture_default_str();
      app.add_option("--data", o->data, "folder of the committed data (corpus, tokenizer model, images/)")
          ->capture_default_str();
      app.add_option("--corpus", o->corpus, "text corpus, one line a piece of text (default: in --data)");
      app.add_option("--tokenizer", o->tokenizer, "SentencePiece .model (default: in --data)");
      app.add_option("--images", o->images, "folder of JPEGs (default: --data/images)");
      app.add_option("--workers", o->workers_given,
                     "measure W = 1..this many worker threads (default: the vCPUs)");
      app.add_option("--tokens", o->b.tokens_per_sample, "text: token ids per sample")->capture_default_str();
      app.add_option("--image", o->b.image_size, "image: output side in pixels")->capture_default_str();
      app.add_option("--warmup-s", o->b.warmup_s, "untimed seconds before the repeats of each W")
          ->capture_default_str();
      app.add_option("--repeats", o->b.repeats, "timed runs per W")->capture_default_str();
      app.add_option("--repeat-s", o->b.repeat_s, "target seconds of one timed run")->capture_default_str();
      app.add_option("--seed", o->b.seed, "crop and flip randomness")->capture_default_str();
      app.add_option("--max-cv", o->b.max_cv, "samples/s CV above this marks a W unstable")
          ->capture_default_str();
      app.add_option("--max-foreign", o->b.max_foreign,
                     "other processes' CPU use (vCPUs) above this marks a W contended")
          ->capture_default_str();
      app.add_option("--path", o->path,
                     "dataset file whose read rate to measure (after dropping it from the cache)");
      app.add_option("--read-repeats", o->read_repeats, "reads of --path")->capture_default_str();
      app.add_option("--read-max-mb", o->read_max_mb, "read at most this many MiB of --path")
          ->capture_default_str();
      app.add_option("--db", o->db, "store: write the rows into its pipeline table");
      app.add_option("--campaign", o->campaign, "campaign name of the store rows")->capture_default_str();
      app.add_option("--out", o->out, "write the JSON report here (input of `predict --pipeline`)");
      app.add_option("--check", o->check,
                     "compare this run with the throughput another run's JSON (or store) predicts");
      app.add_flag("--json", o->json, "print the JSON report");
      return [o] { return run(*o); };
    });

}  // namespace
