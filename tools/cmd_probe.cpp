// scaledl probe: describe and measure a device (DeviceRecord, h^dev), or read a
// spec JSON (--spec, NeuSight device_configs format or ours); optionally store it.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/bench/probe.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/io/store.hpp"

namespace {

struct ProbeCmdOptions {
  std::string device = "cpu";  ///< cpu | cuda | cuda:<i>
  std::string spec;            ///< device spec JSON instead of probing ("" = probe)
  std::string db;              ///< store to write the record into ("" = none)
  bool json = false;           ///< print the record as JSON
  bool no_measure = false;     ///< describe only, skip the measurements
  int threads = 0;             ///< LibTorch intra-op threads, 0 = default
};

std::string num(double v, const char* unit) {
  return v > 0 ? fmt::format("{:.6g} {}", v, unit) : "unknown";
}

int run(const ProbeCmdOptions& o) {
  using namespace scaledl;
  SCALEDL_CHECK(o.threads >= 0, "--threads={} must be >= 0", o.threads);
  DeviceRecord d;
  if (!o.spec.empty()) {
    d = load_device_spec(o.spec);
  } else {
    torch::Device dev = parse_device(o.device);
    set_compute_threads(o.threads > 0 ? o.threads : at::get_num_threads());
    ProbeOptions po;
    po.measure = !o.no_measure;
    d = probe_device(dev, po);
  }
  if (!o.db.empty()) {
    // A stored record must be readable back: it needs measured or spec rates.
    (void)DeviceRecord::from_json(d.to_json(), "--db record of " + d.key());
    Store s(o.db);
    s.put_device(d);
  }
  if (o.json) {
    std::printf("%s\n", d.to_json().dump(2).c_str());
    return 0;
  }
  std::printf("device            %s\n", d.name.c_str());
  std::printf("kind              %s\n", d.kind.c_str());
  std::printf("key               %s\n", d.key().c_str());
  std::printf("cores/SMs         %lld\n", static_cast<long long>(d.cores));
  std::printf("clock             %s\n", num(d.clock_mhz, "MHz").c_str());
  std::printf("memory            %s\n", num(d.mem_gb, "GB").c_str());
  std::printf("L2/LLC            %s\n", num(d.l2_mb, "MB").c_str());
  std::printf("spec FP32 peak    %s\n", num(d.peak_fp32_gflops, "GFLOP/s (spec sheet)").c_str());
  std::printf("spec TF32 peak    %s\n", num(d.peak_tf32_gflops, "GFLOP/s (spec sheet)").c_str());
  std::printf("spec BF16 peak    %s\n", num(d.peak_bf16_gflops, "GFLOP/s (spec sheet)").c_str());
  std::printf("spec bandwidth    %s\n", num(d.peak_mem_bw_gbs, "GB/s (spec sheet)").c_str());
  std::printf("measured matmul   %s\n", num(d.measured_gflops, "GFLOP/s (FP32 torch::mm)").c_str());
  std::printf("measured copy     %s\n", num(d.measured_bw_gbs, "GB/s (read+write)").c_str());
  if (d.extra.is_object() && d.extra.contains("fma_kernel_gflops"))
    std::printf("measured FMA      %.6g GFLOP/s (CUDA kernel)\n", d.extra["fma_kernel_gflops"].get<double>());
  if (!o.db.empty()) std::printf("stored in         %s\n", o.db.c_str());
  return 0;
}

scaledl::cli::Registrar reg(
    {"probe"}, "Describe and measure a device (or read a spec JSON) as a device record", [](CLI::App& app) {
      auto o = std::make_shared<ProbeCmdOptions>();
      app.add_option("--device", o->device, "cpu, cuda or cuda:<i>")->capture_default_str();
      app.add_option("--spec", o->spec,
                     "device spec JSON (NeuSight device_configs or scaledl format) instead of probing");
      app.add_option("--db", o->db, "also store the record in this SQLite store");
      app.add_option("--threads", o->threads, "LibTorch intra-op threads (0 = default)");
      app.add_flag("--json", o->json, "print the record as JSON");
      app.add_flag("--no-measure", o->no_measure, "describe only; skip matmul/copy measurements");
      return [o] { return run(*o); };
    });

}  // namespace
