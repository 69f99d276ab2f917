#pragma once
// Exact allocator bytes of a benchmark (issue #15: peak memory).
//
// CUDA: the caching allocator's own statistics (allocated bytes: current and
// peak since resetPeakStats), i.e. what torch.cuda.max_memory_allocated reports.
// CPU: a counting allocator installed in LibTorch's CPU allocator slot
// (c10::SetAllocator). It wraps c10::alloc_cpu/free_cpu with a 64-byte header
// holding the size, so every tensor storage allocated through LibTorch while it
// is installed is counted exactly, in bytes (not RSS). What LibTorch does not
// allocate through that slot (OpenBLAS/oneDNN scratch buffers, the allocator's
// own headers) is not counted, on CPU as on CUDA.
#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace scaledl {

struct MemoryReading {
  double current_bytes = 0;  ///< bytes allocated now
  double peak_bytes = 0;     ///< highest allocated bytes since the last reset
  std::string method;        ///< "cpu-counting-allocator" | "cuda-caching-allocator" | "" (not measurable)
};

/// Makes memory on `dev` measurable from now on (CPU: installs the counting
/// allocator once per process; CUDA: nothing to install). Tensors allocated
/// before the first call on CPU are not counted.
void memory_meter_install(const torch::Device& dev);
/// Peak := current (CUDA: resetPeakStats).
void memory_meter_reset_peak(const torch::Device& dev);
/// Current and peak allocated bytes; method "" when `dev` cannot be measured
/// (CPU before install, or a CUDA device in a build without CUDA LibTorch).
MemoryReading memory_meter_read(const torch::Device& dev);

}  // namespace scaledl
