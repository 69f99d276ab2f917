// GPU side of the probe: device attributes and an FP32 FMA throughput kernel.
// Attributes are read with cudaDeviceGetAttribute (cudaDeviceProp::clockRate
// is gone in CUDA 13).
#include <cuda_runtime.h>

#include <cstdio>

#include "bench/probe_cuda.hpp"

namespace scaledl::cudaprobe {
namespace {

int report(cudaError_t e, const char* what, char* err, int err_len) {
  if (e == cudaSuccess) return 0;
  std::snprintf(err, static_cast<size_t>(err_len), "%s: %s", what, cudaGetErrorString(e));
  cudaGetLastError();
  return 1;
}

constexpr int kChains = 8;    // independent FMA chains per thread (hide FMA latency)
constexpr int kIters = 4096;  // FMA rounds per chain

// Each thread runs kChains independent a = a * b + c chains for kIters rounds:
// 2 * kChains * kIters FLOP per thread. The sum is stored so nothing is elided.
__global__ void fma_kernel(float* out, float b, float c) {
  float a[kChains];
#pragma unroll
  for (int i = 0; i < kChains; ++i) a[i] = threadIdx.x * 1e-3f + i;
  for (int r = 0; r < kIters; ++r) {
#pragma unroll
    for (int i = 0; i < kChains; ++i) a[i] = fmaf(a[i], b, c);
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < kChains; ++i) s += a[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

}  // namespace

int get_props(int index, Props* p, char* err, int err_len) {
  int n = 0;
  if (report(cudaGetDeviceCount(&n), "cudaGetDeviceCount", err, err_len)) return 1;
  if (index < 0 || index >= n) {
    std::snprintf(err, static_cast<size_t>(err_len), "GPU %d does not exist (%d visible)", index, n);
    return 1;
  }
  cudaDeviceProp prop;
  if (report(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties", err, err_len)) return 1;
  std::snprintf(p->name, sizeof(p->name), "%s", prop.name);
  p->mem_gb = static_cast<double>(prop.totalGlobalMem) / 1e9;
  p->cc_major = prop.major;
  p->cc_minor = prop.minor;
  int v = 0;
  if (report(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, index), "SM count", err, err_len))
    return 1;
  p->sms = v;
  if (report(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, index), "clock rate", err, err_len)) return 1;
  p->clock_mhz = v / 1000.0;  // kHz -> MHz
  if (report(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, index), "L2 size", err, err_len)) return 1;
  p->l2_mb = v / (1024.0 * 1024.0);
  p->mem_clock_mhz = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, index) == cudaSuccess)
    p->mem_clock_mhz = v / 1000.0;
  p->driver_version = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) p->driver_version = v;
  return 0;
}

int fma_gflops(int index, double* gflops, char* err, int err_len) {
  if (report(cudaSetDevice(index), "cudaSetDevice", err, err_len)) return 1;
  int sms = 0;
  if (report(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index), "SM count", err, err_len))
    return 1;
  const int threads = 256, blocks = sms * 16;
  float* out = nullptr;
  if (report(cudaMalloc(&out, sizeof(float) * threads * blocks), "cudaMalloc", err, err_len)) return 1;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  fma_kernel<<<blocks, threads>>>(out, 0.999f, 1e-3f);  // warm-up (clocks, module load)
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0, 0);
    fma_kernel<<<blocks, threads>>>(out, 0.999f, 1e-3f);
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms > 0 && ms < best) best = ms;
  }
  int rc = report(cudaGetLastError(), "fma_kernel", err, err_len);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(out);
  if (rc) return rc;
  double flop = 2.0 * kChains * kIters * static_cast<double>(threads) * blocks;
  *gflops = flop / (best * 1e-3) / 1e9;
  return 0;
}

}  // namespace scaledl::cudaprobe
