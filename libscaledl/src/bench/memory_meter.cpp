// Allocator-exact memory readings (memory_meter.hpp).
#include "bench/memory_meter.hpp"

#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#if defined(SCALEDL_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace scaledl {

namespace {

// LibTorch 2.3 made Allocator::allocate non-const and added copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define SCALEDL_ALLOCATE_CONST
#define SCALEDL_ALLOCATOR_COPY_DATA 1
#else
#define SCALEDL_ALLOCATE_CONST const
#endif

/// Storage = [64-byte header holding the size][n bytes]; c10::alloc_cpu aligns to
/// 64 bytes, so the data pointer keeps LibTorch's alignment. Raw allocations
/// (raw_allocate / raw_deallocate, used inside some LibTorch kernels) work too.
constexpr size_t kHeader = 64;

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};

/// Deleter of the data pointer (data == context, as raw_allocate requires): the
/// header sits kHeader bytes before it.
void count_free(void* data) {
  if (!data) return;
  void* base = static_cast<char*>(data) - kHeader;
  size_t n = 0;
  std::memcpy(&n, base, sizeof n);
  g_current.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
  c10::free_cpu(base);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) SCALEDL_ALLOCATE_CONST override {
    if (n == 0) return {nullptr, nullptr, &count_free, c10::Device(c10::DeviceType::CPU)};
    void* base = c10::alloc_cpu(n + kHeader);  // throws c10::Error when out of memory
    std::memcpy(base, &n, sizeof n);
    const int64_t now =
        g_current.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed) + static_cast<int64_t>(n);
    int64_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &count_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &count_free; }
#ifdef SCALEDL_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
#endif
};

CountingCpuAllocator& counting_allocator() {
  static CountingCpuAllocator a;  // never destroyed before the tensors it counts: process lifetime
  return a;
}

}  // namespace

void memory_meter_install(const torch::Device& dev) {
  if (!dev.is_cpu() || g_installed.exchange(true)) return;
  // Priority 1 outranks the default CPU allocator's registration (0).
  c10::SetAllocator(c10::DeviceType::CPU, &counting_allocator(), 1);
}

void memory_meter_reset_peak(const torch::Device& dev) {
  if (dev.is_cpu()) {
    g_peak.store(g_current.load());
    return;
  }
#if defined(SCALEDL_TORCH_CUDA)
  if (dev.is_cuda()) {
    const int idx = dev.index() < 0 ? 0 : dev.index();
    c10::cuda::CUDACachingAllocator::resetPeakStats(idx);
  }
#endif
}

MemoryReading memory_meter_read(const torch::Device& dev) {
  MemoryReading r;
  if (dev.is_cpu()) {
    if (!g_installed.load()) return r;
    r.current_bytes = static_cast<double>(g_current.load());
    r.peak_bytes = static_cast<double>(std::max(g_peak.load(), g_current.load()));
    r.method = "cpu-counting-allocator";
    return r;
  }
#if defined(SCALEDL_TORCH_CUDA)
  if (dev.is_cuda()) {
    const int idx = dev.index() < 0 ? 0 : dev.index();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(idx);
    // allocated_bytes[0] is StatType::AGGREGATE (all pools), in 1.13 and 2.x.
    r.current_bytes = static_cast<double>(stats.allocated_bytes[0].current);
    r.peak_bytes = static_cast<double>(stats.allocated_bytes[0].peak);
    r.method = "cuda-caching-allocator";
  }
#endif
  return r;
}

}  // namespace scaledl
