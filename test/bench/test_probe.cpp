// Device selection, the spec-sheet table, the timer and the probe on the CPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <thread>

#include "scaledl/bench/bench.hpp"
#include "scaledl/bench/probe.hpp"
#include "scaledl/core/error.hpp"

using namespace scaledl;

namespace {
void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(ParseDevice, AcceptsCpuAndRejectsUnknownDevices) {
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  for (const char* bad : {"tpu", "CPU", "cuda:", "cuda:x", "gpu:0", "", "cpu:1"})
    expect_error([&] { parse_device(bad); }, {"--device", std::string("\"") + bad + "\""});
  if (!torch::cuda::is_available()) {
    expect_error([] { parse_device("cuda:7"); }, {"--device=\"cuda:7\"", "no CUDA GPU"});
    expect_error([] { parse_device("cuda"); }, {"\"cuda\""});
  } else {
    int n = static_cast<int>(torch::cuda::device_count());
    expect_error([&] { parse_device("cuda:" + std::to_string(n)); }, {"GPU(s) are visible"});
    EXPECT_TRUE(parse_device("cuda:0").is_cuda());
  }
}

TEST(GpuSpecTable, MatchesCommonNamesToTheRightRow) {
  struct Case {
    const char* name;
    const char* label;
  };
  for (const Case& c : std::vector<Case>{{"NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"},
                                         {"NVIDIA H100 PCIe", "H100 PCIe 80GB"},
                                         {"NVIDIA H200", "H200 SXM 141GB"},
                                         {"NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"},
                                         {"NVIDIA A100-PCIE-40GB", "A100 40GB"},
                                         {"Tesla V100-SXM2-16GB", "V100 SXM2"},
                                         {"Tesla T4", "T4 16GB"},
                                         {"NVIDIA L4", "L4 24GB"},
                                         {"NVIDIA L40S", "L40S 48GB"}}) {
    auto s = lookup_gpu_spec(c.name);
    ASSERT_TRUE(s.has_value()) << c.name;
    EXPECT_EQ(s->label, c.label) << c.name;
    EXPECT_GT(s->fp32_gflops, 0);
    EXPECT_GT(s->mem_bw_gbs, 0);
  }
  EXPECT_FALSE(lookup_gpu_spec("Imaginary Accelerator 9000").has_value());
}

TEST(Timer, MeasuresASleep) {
  torch::Device cpu(torch::kCPU);
  Timer t(cpu);
  t.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  double ms = t.stop_ms();
  EXPECT_GE(ms, 5.0);
  EXPECT_LT(ms, 1000.0);
}

TEST(Measure, RaisesLaunchesForShortFunctionsAndCountsRepeats) {
  torch::Device cpu(torch::kCPU);
  TimingOptions o;
  o.repeats = 7;
  o.min_sample_ms = 2;
  int calls = 0;
  auto m = measure([&] { ++calls; }, cpu, o);
  EXPECT_EQ(m.stats.n, 7);
  EXPECT_EQ(static_cast<int>(m.samples_ms.size()), 7);
  EXPECT_EQ(m.launches, o.max_launches);  // a no-op never fills 2 ms
  EXPECT_GE(calls, 7 * m.launches);
  // A ~1 ms sleep needs few launches to fill 2 ms.
  auto s = measure([] { std::this_thread::sleep_for(std::chrono::microseconds(1000)); }, cpu, o);
  EXPECT_LE(s.launches, 3);
  EXPECT_GE(s.stats.median_ms, 1.0);
}

TEST(Measure, RejectsBadOptions) {
  torch::Device cpu(torch::kCPU);
  TimingOptions o;
  o.repeats = 0;
  expect_error([&] { measure([] {}, cpu, o); }, {"--repeats=0"});
  o = TimingOptions{};
  o.warmup_min = -1;
  expect_error([&] { measure([] {}, cpu, o); }, {"--warmup=-1"});
}

TEST(Probe, DescribesAndMeasuresTheCpu) {
  torch::Device cpu(torch::kCPU);
  DeviceRecord d = describe_device(cpu);
  EXPECT_EQ(d.kind, "cpu");
  EXPECT_NE(d.name.find("threads"), std::string::npos) << d.name;
  EXPECT_GE(d.cores, 1);
  EXPECT_EQ(d.measured_gflops, 0);
  ProbeOptions po;
  po.matmul_n = 128;
  po.copy_mb = 8;
  po.repeats = 3;
  DeviceRecord m = probe_device(cpu, po);
  EXPECT_EQ(m.key(), d.key());
  EXPECT_GT(m.measured_gflops, 0.01);
  EXPECT_LT(m.measured_gflops, 1e6);
  EXPECT_GT(m.measured_bw_gbs, 0.01);
  EXPECT_LT(m.measured_bw_gbs, 1e5);
  // It round-trips through the device JSON (store format).
  DeviceRecord back = DeviceRecord::from_json(m.to_json());
  EXPECT_DOUBLE_EQ(back.measured_gflops, m.measured_gflops);
}

#ifndef SCALEDL_HAVE_CUDA
TEST(Probe, CudaKernelStandInSaysHowToRebuild) {
  expect_error([] { measure_fma_kernel_gflops(0); }, {"rebuild with -DSCALEDL_CUDA=ON"});
}
#endif

TEST(Probe, CpuKeyNamesTheGenerationAndOneThreadCountForEveryPool) {
  const int before = at::get_num_threads();
  set_compute_threads(1);
  DeviceRecord d = describe_device(torch::Device(torch::kCPU));
  // Vendor family/model/stepping and ISA level are part of the key: "AMD EPYC"
  // VMs on different host generations must not share one.
  for (const char* k : {"vendor", "cpu_family", "cpu_model", "stepping", "isa", "blas_threads"})
    EXPECT_TRUE(d.extra.contains(k)) << k << " " << d.extra.dump();
  const std::string ident =
      fmt::format("{}/{}/{}", d.extra["cpu_family"].get<std::string>(),
                  d.extra["cpu_model"].get<std::string>(), d.extra["stepping"].get<std::string>());
  EXPECT_NE(d.key().find(ident), std::string::npos) << d.key();
  EXPECT_NE(d.key().find(d.extra["isa"].get<std::string>()), std::string::npos) << d.key();
  EXPECT_NE(d.key().find("(1 threads"), std::string::npos) << d.key();
  // With a pthread OpenBLAS loaded, its pool follows set_compute_threads.
  if (blas_threads() > 0) {
    EXPECT_EQ(blas_threads(), 1);
    EXPECT_EQ(d.extra["blas_threads"].get<int>(), 1);
    // Its kernel set is recorded ("Prescott" on a CPU it does not know: 4x slower matmul).
    EXPECT_FALSE(d.extra["blas_core"].get<std::string>().empty()) << d.extra.dump();
    EXPECT_EQ(d.extra["blas_core"].get<std::string>(), blas_core());
    const char* forced = std::getenv("OPENBLAS_CORETYPE");
    EXPECT_EQ(d.key().find("BLAS core") != std::string::npos, forced && *forced) << d.key();
  }
  set_compute_threads(std::max(1, before));
}
