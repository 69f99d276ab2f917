#pragma once
// Needs LibTorch: yes (this header includes LibTorch's headers).
// Device probe: what a device is (name, cores/SMs, clocks, memory), its
// spec-sheet peaks where known, and what it measurably does (FP32 matmul
// GFLOP/s, copy bandwidth GB/s). Produces the DeviceRecord h^dev (device.hpp).
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "scaledl/io/device.hpp"

namespace scaledl {

/// One row of the built-in spec-sheet table (vendor data sheets, dense rates,
/// no sparsity). Values are SPEC values, never measurements.
struct GpuSpec {
  std::vector<std::string> match;  ///< all substrings must occur in the CUDA device name
  std::string label;               ///< e.g. "H100 SXM5 80GB"
  int sms = 0;                     ///< streaming multiprocessors
  double boost_mhz = 0;            ///< boost clock, MHz
  double mem_gb = 0;               ///< memory, GB
  double l2_mb = 0;                ///< L2 cache, MB
  double fp32_gflops = 0;          ///< peak FP32 (non-tensor), GFLOP/s
  double tf32_gflops = 0;          ///< peak dense TF32 tensor core, GFLOP/s (0 = none)
  double bf16_gflops = 0;          ///< peak dense BF16/FP16 tensor core, GFLOP/s
  double mem_bw_gbs = 0;           ///< memory bandwidth, GB/s
};

/// The built-in table (H100 SXM/PCIe, H200, A100, A10, L4, L40S, V100, T4, RTX 4090).
const std::vector<GpuSpec>& gpu_spec_table();
/// First table row whose `match` substrings all occur in `device_name`.
std::optional<GpuSpec> lookup_gpu_spec(const std::string& device_name);

struct ProbeOptions {
  bool measure = true;   ///< run the matmul/copy/kernel measurements (else describe only)
  int64_t matmul_n = 0;  ///< square matmul size; 0 = 1024 on CPU, 8192 on GPU
  int64_t copy_mb = 0;   ///< bytes copied per launch in MiB; 0 = 256 on CPU, 1024 on GPU
  int repeats = 5;       ///< timed samples per measurement, >= 1 (each rate: the median of three
                         ///< passes of this many, so one noisy pass does not set the record)
};

/// Describes `dev` without measuring: name, kind, cores (CPU: LibTorch intra-op
/// threads; GPU: SMs), clock, memory, L2, and spec peaks from the table.
/// The name of a CPU includes vendor, family/model/stepping, ISA level
/// (sse|avx|avx2|avx512|amx) and the thread count (and the BLAS pool's when it
/// differs), so that different CPU generations and runs with different
/// --threads are different devices in the store.
DeviceRecord describe_device(const torch::Device& dev);
/// describe_device + measurements (when opt.measure): measured_gflops (FP32
/// torch::mm, 2 n^3 FLOP per launch), measured_bw_gbs (tensor copy, 2 x bytes
/// per launch: read + write) and, on GPU, extra.fma_kernel_gflops from the
/// CUDA kernel of probe_cuda.cu.
DeviceRecord probe_device(const torch::Device& dev, const ProbeOptions& opt = {});

/// Sets the CPU compute threads (n >= 1): LibTorch's intra-op pool and, when
/// LibTorch calls a pthread OpenBLAS (Debian's build), OpenBLAS's own pool,
/// which at::set_num_threads does not reach.
void set_compute_threads(int n);
/// Threads of the pthread OpenBLAS LibTorch calls (0 when none is loaded).
int blas_threads();
/// OpenBLAS's kernel set (openblas_get_corename: "Haswell", "SkylakeX", ...), "" without OpenBLAS.
std::string blas_core();

/// Measured FP32 matmul rate of an n x n x n torch::mm on dev, GFLOP/s.
double measure_matmul_gflops(const torch::Device& dev, int64_t n, int repeats = 5);
/// Measured copy bandwidth (read + write) of a `bytes` tensor copy on dev, GB/s.
double measure_copy_gbs(const torch::Device& dev, int64_t bytes, int repeats = 5);
/// FP32 FMA throughput of the CUDA kernel in probe_cuda.cu on GPU `index`,
/// GFLOP/s. Without CUDA kernels throws "rebuild with -DSCALEDL_CUDA=ON".
double measure_fma_kernel_gflops(int index);

}  // namespace scaledl
