// Device selection (parse_device, the one place) and the device probe.
#include "scaledl/bench/probe.hpp"

#include <algorithm>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include "bench/probe_cuda.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/core/error.hpp"

namespace scaledl {

torch::Device parse_device(const std::string& s, const std::string& key) {
  static const std::regex re(R"(^(cpu|cuda)(:([0-9]{1,3}))?$)");
  std::smatch m;
  SCALEDL_CHECK(std::regex_match(s, m, re), "{}=\"{}\" is not a device (expected cpu, cuda or cuda:<index>)",
                key, s);
  if (m[1] == "cpu") {
    SCALEDL_CHECK(!m[2].matched, "{}=\"{}\": the CPU has no index (use cpu)", key, s);
    return torch::Device(torch::kCPU);
  }
  int idx = m[2].matched ? std::stoi(m[3]) : 0;
  SCALEDL_CHECK(torch::cuda::is_available(), "{}=\"{}\" but LibTorch {} sees no CUDA GPU (use --device cpu)",
                key, s, libtorch_version());
  int n = static_cast<int>(torch::cuda::device_count());
  SCALEDL_CHECK(idx < n, "{}=\"{}\" but only {} GPU(s) are visible (cuda:0..cuda:{})", key, s, n, n - 1);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(idx));
}

void set_compute_threads(int n) {
  SCALEDL_CHECK(n >= 1, "--threads={} must be >= 1", n);
  at::set_num_threads(n);
  using SetThreads = void (*)(int);
  if (auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}

int blas_threads() {
  using GetThreads = int (*)();
  if (auto f = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) return f();
  return 0;
}

std::string blas_core() {
  // OpenBLAS picks its kernels from CPUID at load time; a CPU it does not know
  // gets an old generic core (Debian's 0.3.21 on an Emerald Rapids guest:
  // "Prescott", SSE3, a quarter of the matmul rate). OPENBLAS_CORETYPE overrides it.
  using GetCore = char* (*)();
  if (auto f = reinterpret_cast<GetCore>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
    if (const char* c = f()) return c;
  return "";
}

// ---- spec sheet table --------------------------------------------------------

const std::vector<GpuSpec>& gpu_spec_table() {
  // NVIDIA data sheets, dense (no structured sparsity) tensor-core rates.
  // Order matters: more specific rows first.
  static const std::vector<GpuSpec> t = {
      //  match                 label               SMs  MHz   GB   L2MB  FP32     TF32     BF16     GB/s
      {{"H100", "PCIe"}, "H100 PCIe 80GB", 114, 1755, 80, 50, 51200, 378000, 756000, 2000},
      {{"H100", "NVL"}, "H100 NVL 94GB", 132, 1785, 94, 50, 60000, 417500, 835000, 3900},
      {{"H100"}, "H100 SXM5 80GB", 132, 1980, 80, 50, 66900, 494700, 989400, 3350},
      {{"H200"}, "H200 SXM 141GB", 132, 1980, 141, 50, 66900, 494700, 989400, 4800},
      {{"A100", "PCIE", "80GB"}, "A100 PCIe 80GB", 108, 1410, 80, 40, 19500, 156000, 312000, 1935},
      {{"A100", "80GB"}, "A100 SXM4 80GB", 108, 1410, 80, 40, 19500, 156000, 312000, 2039},
      {{"A100"}, "A100 40GB", 108, 1410, 40, 40, 19500, 156000, 312000, 1555},
      {{"A10G"}, "A10G 24GB", 80, 1710, 24, 6, 31200, 35000, 70000, 600},
      {{"A10"}, "A10 24GB", 72, 1695, 24, 6, 31200, 62500, 125000, 600},
      {{"L40S"}, "L40S 48GB", 142, 2520, 48, 96, 91600, 183000, 362000, 864},
      {{"L4"}, "L4 24GB", 58, 2040, 24, 48, 30300, 60000, 121000, 300},
      {{"V100", "PCIE"}, "V100 PCIe", 80, 1380, 16, 6, 14000, 0, 112000, 900},
      {{"V100"}, "V100 SXM2", 80, 1530, 16, 6, 15700, 0, 125000, 900},
      {{"T4"}, "T4 16GB", 40, 1590, 16, 4, 8100, 0, 65000, 320},
      {{"4090"}, "GeForce RTX 4090", 128, 2520, 24, 72, 82600, 82600, 165200, 1008},
  };
  return t;
}

std::optional<GpuSpec> lookup_gpu_spec(const std::string& device_name) {
  std::string up = device_name;
  for (auto& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& g : gpu_spec_table()) {
    bool all = true;
    for (const auto& m : g.match) {
      std::string mu = m;
      for (auto& c : mu) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      all = all && up.find(mu) != std::string::npos;
    }
    if (all) return g;
  }
  return std::nullopt;
}

// ---- describe ----------------------------------------------------------------

namespace {

/// First value of "key : value" in a /proc file, "" if absent.
std::string proc_field(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    auto c = line.find(':');
    if (c == std::string::npos) continue;
    std::string k = line.substr(0, c);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k == key) {
      std::string v = line.substr(c + 1);
      auto b = v.find_first_not_of(" \t");
      return b == std::string::npos ? "" : v.substr(b);
    }
  }
  return "";
}

double leading_number(const std::string& s) {
  try {
    return s.empty() ? 0 : std::stod(s);
  } catch (...) {
    return 0;
  }
}

/// The highest vector ISA level the CPU reports (/proc/cpuinfo flags).
std::string isa_level(const std::string& flags) {
  std::istringstream in(flags);
  std::set<std::string> f{std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
  if (f.count("amx_tile")) return "amx";
  if (f.count("avx512f")) return "avx512";
  if (f.count("avx2")) return "avx2";
  if (f.count("avx")) return "avx";
  return "sse";
}

DeviceRecord describe_cpu() {
  DeviceRecord d;
  d.kind = "cpu";
  const std::string info = "/proc/cpuinfo";
  std::string model = proc_field(info, "model name");
  if (model.empty()) model = "unknown CPU";
  const std::string vendor = proc_field(info, "vendor_id");
  const std::string family = proc_field(info, "cpu family"), cpu_model = proc_field(info, "model"),
                    stepping = proc_field(info, "stepping");
  const std::string isa = isa_level(proc_field(info, "flags"));
  int threads = at::get_num_threads();
  int blas = blas_threads();
  // Hosts sold under one marketing name ("AMD EPYC" on a VM) differ in
  // generation: family/model/stepping and the ISA level are part of the name,
  // hence of the store key. A BLAS pool that differs from LibTorch's is too.
  std::string ident =
      fmt::format("{} {}/{}/{} {}", vendor.empty() ? "unknown" : vendor, family.empty() ? "?" : family,
                  cpu_model.empty() ? "?" : cpu_model, stepping.empty() ? "?" : stepping, isa);
  std::string thr = blas > 0 && blas != threads ? fmt::format("{} threads, BLAS {}", threads, blas)
                                                : fmt::format("{} threads", threads);
  // The kernel set OpenBLAS picks follows from the CPU (in the key already);
  // one forced with OPENBLAS_CORETYPE changes the speed, so it joins the key.
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const std::string core = blas_core();
  if (forced && *forced && !core.empty()) thr += fmt::format(", BLAS core {}", core);
  d.name = fmt::format("{} [{}] ({})", model, ident, thr);
  d.cores = threads;
  d.clock_mhz = leading_number(proc_field(info, "cpu MHz"));
  d.mem_gb = leading_number(proc_field("/proc/meminfo", "MemTotal")) * 1024 / 1e9;  // kB
  d.l2_mb = leading_number(proc_field(info, "cache size")) / 1024;                  // KB, last level
  d.extra = {{"online_cpus", static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN))},
             {"vendor", vendor},
             {"cpu_family", family},
             {"cpu_model", cpu_model},
             {"stepping", stepping},
             {"microcode", proc_field(info, "microcode")},
             {"isa", isa},
             {"intra_op_threads", threads},
             {"blas_threads", blas},
             {"blas_core", core},
             {"clock_source", "/proc/cpuinfo cpu MHz (current, not max)"}};
  return d;
}

DeviceRecord describe_cuda(int index) {
  DeviceRecord d;
  d.kind = "cuda";
  d.extra = nlohmann::json::object();
  cudaprobe::Props p{};
  char err[512] = {0};
  if (cudaprobe::get_props(index, &p, err, sizeof(err)) == 0) {
    d.name = p.name;
    d.cores = p.sms;
    d.clock_mhz = p.clock_mhz;
    d.mem_gb = p.mem_gb;
    d.l2_mb = p.l2_mb;
    d.extra["compute_capability"] = fmt::format("{}.{}", p.cc_major, p.cc_minor);
    d.extra["mem_clock_mhz"] = p.mem_clock_mhz;
    d.extra["driver_version"] = p.driver_version;
  } else {
    // LibTorch can still run on the GPU; only the attributes are unknown.
    d.name = fmt::format("cuda:{} (unnamed)", index);
    d.extra["props_error"] = err;
  }
  if (auto s = lookup_gpu_spec(d.name)) {
    d.peak_fp32_gflops = s->fp32_gflops;
    d.peak_tf32_gflops = s->tf32_gflops;
    d.peak_bf16_gflops = s->bf16_gflops;
    d.peak_mem_bw_gbs = s->mem_bw_gbs;
    if (d.cores == 0) d.cores = s->sms;
    if (d.clock_mhz == 0) d.clock_mhz = s->boost_mhz;
    if (d.mem_gb == 0) d.mem_gb = s->mem_gb;
    if (d.l2_mb == 0) d.l2_mb = s->l2_mb;
    d.extra["spec_source"] = "built-in spec-sheet table (SPEC values, not measured): " + s->label;
  }
  d.extra["cuda_runtime"] = cuda_runtime_version();
  return d;
}

TimingOptions probe_timing(int repeats) {
  TimingOptions o;
  o.repeats = repeats;
  o.min_sample_ms = 5;
  o.max_seconds = 20;
  return o;
}

}  // namespace

DeviceRecord describe_device(const torch::Device& dev) {
  DeviceRecord d = dev.is_cuda() ? describe_cuda(dev.index() < 0 ? 0 : dev.index()) : describe_cpu();
  d.extra["libtorch"] = libtorch_version();
  return d;
}

double measure_matmul_gflops(const torch::Device& dev, int64_t n, int repeats) {
  SCALEDL_CHECK(n >= 16, "matmul_n={} must be >= 16", n);
  apply_dtype_mode(DType::FP32);  // true FP32, no TF32 tensor cores
  torch::NoGradGuard ng;
  auto o = torch::TensorOptions().dtype(torch::kFloat).device(dev);
  auto a = torch::randn({n, n}, o), b = torch::randn({n, n}, o), c = torch::empty({n, n}, o);
  auto m = measure([&] { torch::mm_out(c, a, b); }, dev, probe_timing(repeats));
  return 2.0 * n * n * n / (m.stats.median_ms * 1e-3) / 1e9;
}

double measure_copy_gbs(const torch::Device& dev, int64_t bytes, int repeats) {
  SCALEDL_CHECK(bytes >= 4096, "copy bytes={} must be >= 4096", bytes);
  torch::NoGradGuard ng;
  auto o = torch::TensorOptions().dtype(torch::kFloat).device(dev);
  auto src = torch::randn({bytes / 4}, o), dst = torch::empty({bytes / 4}, o);
  auto m = measure([&] { dst.copy_(src); }, dev, probe_timing(repeats));
  return 2.0 * static_cast<double>(bytes) / (m.stats.median_ms * 1e-3) / 1e9;
}

double measure_fma_kernel_gflops(int index) {
  double g = 0;
  char err[512] = {0};
  SCALEDL_CHECK(cudaprobe::fma_gflops(index, &g, err, sizeof(err)) == 0, "FMA kernel on cuda:{}: {}", index,
                err);
  return g;
}

DeviceRecord probe_device(const torch::Device& dev, const ProbeOptions& opt) {
  SCALEDL_CHECK(opt.repeats >= 1, "probe repeats={} must be >= 1", opt.repeats);
  DeviceRecord d = describe_device(dev);
  if (!opt.measure) return d;
  const bool gpu = dev.is_cuda();
  int64_t n = opt.matmul_n > 0 ? opt.matmul_n : (gpu ? 8192 : 1024);
  int64_t mb = opt.copy_mb > 0 ? opt.copy_mb : (gpu ? 1024 : 256);
  // Three passes, each the median of `repeats` samples, one after another; each rate is the
  // median of the passes, so one pass that met a noisy spell of a shared VM (a probe that read
  // 58 GFLOP/s where the machine sustains far more) does not set the record.
  constexpr int kPasses = 3;
  std::vector<double> gflops, gbs;
  try {
    for (int pass = 0; pass < kPasses; ++pass) {
      gflops.push_back(measure_matmul_gflops(dev, n, opt.repeats));
      gbs.push_back(measure_copy_gbs(dev, mb << 20, opt.repeats));
    }
  } catch (const c10::Error& e) {
    fail("probe of {} failed: {}", dev.str(), e.what_without_backtrace());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  d.measured_gflops = median(gflops);
  d.measured_bw_gbs = median(gbs);
  d.extra["measured"] = {{"matmul_n", n},          {"copy_mib", mb},
                         {"repeats", opt.repeats}, {"threads", at::get_num_threads()},
                         {"passes", kPasses},      {"pass_gflops", gflops},
                         {"pass_gbs", gbs}};
  if (gpu) {
    try {
      d.extra["fma_kernel_gflops"] = measure_fma_kernel_gflops(dev.index() < 0 ? 0 : dev.index());
    } catch (const Error& e) {
      d.extra["fma_kernel_error"] = e.what();
    }
  }
  return d;
}

}  // namespace scaledl
