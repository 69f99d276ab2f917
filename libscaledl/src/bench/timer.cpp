// Timer, the measurement loop (warm-up until stable, then repeats), failure
// classification and the dtype/device helpers of bench.hpp.
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <new>

#include "bench/timer_cuda.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/core/error.hpp"

#if defined(SCALEDL_TORCH_CUDA)  // LibTorch built with CUDA (not just nvcc present)
#include <c10/cuda/CUDACachingAllocator.h>
#define SCALEDL_HAVE_CACHING_ALLOCATOR 1
#endif

namespace scaledl {

void synchronize(const torch::Device& dev) {
  if (dev.is_cuda()) torch::cuda::synchronize(dev.index() < 0 ? -1 : dev.index());
}

torch::ScalarType torch_dtype(DType d) {
  switch (d) {
    case DType::FP32:
    case DType::TF32:
      return torch::kFloat;
    case DType::BF16:
      return torch::kBFloat16;
    case DType::FP16:
      return torch::kHalf;
    case DType::FP8:
      fail(
          "dtype=fp8 is not benchmarked by ScaleDL: FP8 GEMM rows come from imported tables "
          "(scaledl import aiconfigurator)");
  }
  return torch::kFloat;
}

void apply_dtype_mode(DType d) {
  // TF32 is FP32 storage with tensor-core matmuls; the switch is global in LibTorch.
  at::globalContext().setAllowTF32CuBLAS(d == DType::TF32);
  at::globalContext().setAllowTF32CuDNN(d == DType::TF32);
}

std::string libtorch_version() {
  return fmt::format("{}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH);
}

std::string cuda_runtime_version() {
  int v = cudart::runtime_version();
  if (v <= 0) return "";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// ---- Timer -----------------------------------------------------------------

Timer::Timer(const torch::Device& dev) : dev_(dev) {
  if (dev_.is_cuda() && cudart::built_with_cuda()) {
    ev_[0] = cudart::event_create();
    ev_[1] = cudart::event_create();
    events_ = ev_[0] && ev_[1];
  }
}

Timer::~Timer() {
  cudart::event_destroy(ev_[0]);
  cudart::event_destroy(ev_[1]);
}

void Timer::start() {
  if (events_) {
    cudart::event_record(ev_[0]);
  } else {
    synchronize(dev_);  // nothing queued before the region may count
    t0_ = std::chrono::steady_clock::now();
  }
}

double Timer::stop_ms() {
  if (events_) {
    cudart::event_record(ev_[1]);
    double ms = cudart::event_elapsed_ms(ev_[0], ev_[1]);
    SCALEDL_CHECK(ms >= 0, "CUDA event timing failed on {}", dev_.str());
    return ms;
  }
  synchronize(dev_);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

// ---- measure ---------------------------------------------------------------

namespace {

/// True when the last three samples lie within +-tol of their median.
bool last_three_agree(const std::vector<double>& w, double tol) {
  if (w.size() < 3) return false;
  std::vector<double> t(w.end() - 3, w.end());
  std::sort(t.begin(), t.end());
  double med = t[1];
  return med > 0 && t[0] >= med * (1 - tol) && t[2] <= med * (1 + tol);
}

int launches_for(double per_launch_ms, const TimingOptions& o) {
  if (!(per_launch_ms > 0)) return o.max_launches;
  double n = std::ceil(o.min_sample_ms / per_launch_ms);
  return static_cast<int>(std::clamp(n, 1.0, static_cast<double>(o.max_launches)));
}

}  // namespace

void check_timing_options(const TimingOptions& o) {
  SCALEDL_CHECK(o.warmup_min >= 0, "--warmup={} must be >= 0", o.warmup_min);
  SCALEDL_CHECK(o.warmup_max >= o.warmup_min, "warmup_max={} must be >= --warmup={}", o.warmup_max,
                o.warmup_min);
  SCALEDL_CHECK(o.repeats >= 1, "--repeats={} must be >= 1", o.repeats);
  SCALEDL_CHECK(o.stable_tol > 0, "stable_tol={} must be > 0", o.stable_tol);
  SCALEDL_CHECK(o.min_sample_ms > 0, "--min-sample-ms={} must be > 0", o.min_sample_ms);
  SCALEDL_CHECK(o.max_launches >= 1, "max_launches={} must be >= 1", o.max_launches);
  SCALEDL_CHECK(o.unstable_cv > 0, "--max-cv={} must be > 0", o.unstable_cv);
  SCALEDL_CHECK(o.max_seconds > 0, "--max-seconds={} must be > 0", o.max_seconds);
}

Measurement measure(const std::function<void()>& fn, const torch::Device& dev, const TimingOptions& o) {
  check_timing_options(o);
  using clock = std::chrono::steady_clock;
  const auto begin = clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(clock::now() - begin).count(); };

  Timer timer(dev);
  auto sample = [&](int launches) {
    timer.start();
    for (int i = 0; i < launches; ++i) fn();
    return timer.stop_ms() / launches;
  };

  Measurement m;
  m.unstable_cv_used = o.unstable_cv;
  // The first, cold call sizes the sample; it is slower than steady state, so
  // launches are re-sized below when a warm sample turns out too short.
  m.launches = launches_for(sample(1), o);
  m.warmup_samples = 1;
  std::vector<double> w;
  while (true) {
    bool enough = static_cast<int>(w.size()) >= o.warmup_min;
    if (enough && (o.warmup_min == 0 || last_three_agree(w, o.stable_tol))) {
      m.warm = true;
      break;
    }
    if (m.warmup_samples >= std::max(o.warmup_max, 1) || elapsed_s() > o.max_seconds / 2) break;
    double s = sample(m.launches);
    ++m.warmup_samples;
    if (s * m.launches < 0.5 * o.min_sample_ms && m.launches < o.max_launches) {
      m.launches = launches_for(s, o);
      w.clear();  // samples of different lengths are not compared
      continue;
    }
    w.push_back(s);
  }
  for (int r = 0; r < o.repeats; ++r) {
    m.samples_ms.push_back(sample(m.launches));
    if (r >= 2 && elapsed_s() > o.max_seconds) break;
  }
  m.stats = TimingStats::from_samples(m.samples_ms);
  return m;
}

// ---- failures --------------------------------------------------------------

bool is_oom_message(const std::string& msg) {
  for (const char* p : {"out of memory", "not enough memory", "can't allocate memory", "std::bad_alloc",
                        "Tried to allocate", "cannot allocate memory"})
    if (msg.find(p) != std::string::npos) return true;
  return false;
}

namespace {
std::string first_line(const std::string& s) {
  auto p = s.find('\n');
  std::string l = p == std::string::npos ? s : s.substr(0, p);
  if (l.size() > 300) l = l.substr(0, 297) + "...";
  return l;
}
}  // namespace

Failure classify_current_exception() {
  std::string msg;
  bool oom = false;
  try {
    throw;
  } catch (const c10::Error& e) {
    msg = e.what_without_backtrace();
    oom = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr;
  } catch (const std::bad_alloc&) {
    msg = "std::bad_alloc";
    oom = true;
  } catch (const std::exception& e) {
    msg = e.what();
  } catch (...) {
    msg = "unknown exception";
  }
  oom = oom || is_oom_message(msg);
  return {oom ? "oom" : "error", first_line(msg)};
}

void release_cached_memory(const torch::Device& dev) {
#ifdef SCALEDL_HAVE_CACHING_ALLOCATOR
  if (dev.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

}  // namespace scaledl
