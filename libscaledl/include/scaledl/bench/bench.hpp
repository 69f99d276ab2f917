#pragma once
// Needs LibTorch: yes (this header includes LibTorch's headers).
// Timing utilities shared by every benchmark of the bench stage (layer
// microbenchmarks here, whole models in model_bench.cpp), and the layer
// microbenchmark interface.
//
// Method (docs/bench.md): a "sample" is `launches` back-to-back calls of the
// timed function divided by `launches`; it is timed with CUDA events on a GPU
// (steady_clock + torch::cuda::synchronize() when the build has no CUDA
// kernels) and with steady_clock on the CPU. Warm-up runs samples until three
// consecutive ones agree within `stable_tol` (or `warmup_max` is reached), then
// `repeats` samples are summarised by TimingStats (median, p10, p90, CV).
//
// Everything here is device-agnostic: the torch::Device comes from
// parse_device() at run time. No CUDA types appear in this header.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "scaledl/core/progress.hpp"
#include "scaledl/design/plan.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/layer_types.hpp"

namespace scaledl {

// ---- device selection (the one place) --------------------------------------

/// Parses "cpu", "cuda" (= cuda:0) or "cuda:<i>"; checks that the GPU exists.
/// Throws Error naming `key` and the value otherwise ("--device=tpu is not a device ...").
torch::Device parse_device(const std::string& s, const std::string& key = "--device");
/// Waits for all work queued on `dev` (no-op on CPU).
void synchronize(const torch::Device& dev);
/// The torch dtype of a ScaleDL dtype (TF32 -> Float; see apply_dtype_mode).
torch::ScalarType torch_dtype(DType d);
/// Enables TF32 tensor-core matmuls exactly when d == TF32 (global LibTorch switch).
void apply_dtype_mode(DType d);
/// LibTorch version "major.minor.patch" this binary was built against.
std::string libtorch_version();
/// CUDA runtime version ("12.4") when built with -DSCALEDL_CUDA=ON, "" otherwise.
std::string cuda_runtime_version();

// ---- timer -----------------------------------------------------------------

/// Times a region on a device, in milliseconds. On a CUDA device it records
/// CUDA events on the default stream when the build has CUDA kernels, and
/// otherwise synchronises and reads steady_clock. On the CPU: steady_clock.
class Timer {
 public:
  explicit Timer(const torch::Device& dev);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void start();
  /// Elapsed ms since start(); waits for the device to finish the region.
  double stop_ms();

 private:
  torch::Device dev_;
  bool events_ = false;               ///< CUDA events in use
  void* ev_[2] = {nullptr, nullptr};  ///< cudaEvent_t, opaque here
  std::chrono::steady_clock::time_point t0_;
};

// ---- measurement -----------------------------------------------------------

/// Options of one measurement. Defaults are those documented in docs/bench.md.
struct TimingOptions {
  int warmup_min = 3;   ///< warm-up samples always run before timing, >= 0
  int warmup_max = 50;  ///< give up waiting for stability after this many warm-up samples, >= warmup_min
  double stable_tol =
      0.10;          ///< warm-up is stable when 3 consecutive samples lie within +-tol of their median, > 0
  int repeats = 10;  ///< timed samples summarised in TimingStats, >= 1
  double min_sample_ms = 1.0;  ///< launches per sample are raised until a sample lasts >= this (ms), > 0
  int max_launches = 1000;     ///< upper bound on launches per sample, >= 1
  double unstable_cv = 0.10;   ///< CV above this marks the measurement "unstable", > 0
  double max_seconds = 60;  ///< time budget of one measurement incl. warm-up (s); repeats stop early past it
};

/// Result of measure(): statistics of the per-launch time and how they were obtained.
struct Measurement {
  TimingStats stats;               ///< per-launch time, ms
  std::vector<double> samples_ms;  ///< the timed samples (per launch), ms
  int warmup_samples = 0;          ///< warm-up samples run
  int launches = 1;                ///< launches per sample
  bool warm = false;               ///< warm-up reached the stability rule (false: hit warmup_max)
  double unstable_cv_used = 0.10;  ///< TimingOptions::unstable_cv it was judged against
  /// Trustworthy: warm-up converged and CV <= the threshold.
  bool stable() const { return warm && stats.n > 0 && stats.cv <= unstable_cv_used; }
};

/// Throws Error naming the option when `o` is out of range.
void check_timing_options(const TimingOptions& o);

/// Times `fn` on `dev` by the method above. Exceptions from fn propagate.
Measurement measure(const std::function<void()>& fn, const torch::Device& dev, const TimingOptions& opt = {});

/// How a failed run is recorded: status "oom" (allocation failed on any device)
/// or "error" (anything else), with a one-line reason.
struct Failure {
  std::string status;
  std::string reason;
};
/// Classifies the exception in flight (call inside a catch block).
Failure classify_current_exception();
/// True when a message says an allocation failed (CUDA or CPU allocator).
bool is_oom_message(const std::string& msg);
/// Releases cached device memory after a failure (no-op on CPU or without CUDA kernels).
void release_cached_memory(const torch::Device& dev);

// ---- layer microbenchmarks -------------------------------------------------

/// One layer type's microbenchmark. Implementations live one per file in
/// src/bench/layer_<type>.cpp and register themselves by layer type.
/// FLOP/byte figures come from layer_cost(), never from here.
class LayerBench {
 public:
  virtual ~LayerBench() = default;
  /// Builds inputs and parameters on `dev` for `dims` (layer_info(type).dims) in dtype.
  virtual void setup(const std::vector<int64_t>& dims, DType dtype, const torch::Device& dev) = 0;
  /// One forward pass (or one optimizer step for Optimizer); returns its output
  /// (undefined tensor when there is none). Runs with autograd enabled, as in training.
  virtual torch::Tensor forward() = 0;
  /// Tensors whose gradients the backward pass computes (inputs and parameters);
  /// empty when the type has no backward.
  virtual std::vector<torch::Tensor> grad_inputs() const = 0;
};

using LayerBenchFactory = std::function<std::unique_ptr<LayerBench>()>;

/// Registers a layer benchmark; returns 0. Used through SCALEDL_REGISTER_LAYER_BENCH.
int register_layer_bench(LayerType t, LayerBenchFactory f);

/// In src/bench/layer_<x>.cpp: SCALEDL_REGISTER_LAYER_BENCH(linear, LayerType::Linear, LinearBench)
/// defines the anchor symbol scaledl_layer_bench_linear that the registry
/// references, so the static library never drops the file at link time.
#define SCALEDL_REGISTER_LAYER_BENCH(name, type, Class)             \
  int scaledl_layer_bench_##name = ::scaledl::register_layer_bench( \
      type, [] { return std::unique_ptr<::scaledl::LayerBench>(new Class()); })
/// A fresh benchmark object for type t; throws when none is registered.
std::unique_ptr<LayerBench> make_layer_bench(LayerType t);
/// Types with a registered benchmark.
std::vector<LayerType> registered_layer_benches();

/// Forward and backward times of one layer config (one row of the store).
struct LayerTiming {
  Measurement fwd;
  Measurement bwd;  ///< stats.n == 0 when the type has no backward
  bool has_bwd = false;
  PeakMemory memory;  ///< one forward (+ backward) call, allocator-exact (memory_meter.hpp)
};

/// Builds the layer and times forward (with autograd recording, as in
/// training) and backward (torch::autograd::grad of the output w.r.t.
/// grad_inputs(), retain_graph, so nothing accumulates) separately.
/// Exceptions (OOM, unsupported dtype) propagate to the caller.
LayerTiming time_layer(LayerType t, const std::vector<int64_t>& dims, DType dtype, const torch::Device& dev,
                       const TimingOptions& opt = {});

// ---- layer campaigns (`scaledl bench layers`) --------------------------------

struct LayerCampaignOptions {
  std::string campaign = "default";  ///< campaign name; rows are keyed by (campaign, config key, device)
  std::string device = "cpu";        ///< cpu | cuda | cuda:<i> (parse_device)
  int threads = 0;                   ///< LibTorch intra-op threads; 0 = LibTorch's default
  TimingOptions timing;              ///< warm-up, repeats, launches, unstable threshold
  double mem_limit_gb = 0;           ///< configs whose estimate (2 x bytes of layer_cost) exceeds this are
                                     ///< recorded "oom" without running; 0 = no limit
  bool full_probe = true;            ///< when the store lacks the device: full probe_device (true) or a
                                     ///< quick one (256^3 matmul, 16 MiB copy; false)
  /// progress on stderr: a bar with ETA (a terminal), a line every 10 s (a log), or none
  ProgressMode progress = ProgressMode::Off;
  /// > 1: time the whole plan this many times, one pass after another, and write each
  /// config's row from its passes (combine_layer_passes): a slow spell of a noisy
  /// machine then falls on one pass of a config, not on all its samples. Each pass is
  /// kept in the store's layer_passes table, so a stopped campaign resumes mid-pass.
  int passes = 1;
};

/// The checks run_layer_campaign() makes of its options (campaign, threads, memory limit,
/// passes, timing): one error naming the option. `bench layers` calls it before it opens
/// the store, so a bad option creates no store.
void check_layer_campaign_options(const LayerCampaignOptions& opt);

/// One config's row from its passes (in pass order, all of one config): failed passes
/// (status other than ok / unstable) make the row fail like the first of them;
/// otherwise the row is ok when most passes are ok, and its times come from those
/// passes (all passes when it is unstable): median of the pass medians, p10 the
/// lowest p10, p90 the highest p90, cv the median of the pass cvs, n the sum. The
/// reason says how far the pass medians spread.
LayerMeasurement combine_layer_passes(const std::vector<LayerMeasurement>& passes);

struct LayerCampaignSummary {
  size_t total = 0;    ///< configs in the plan
  size_t skipped = 0;  ///< already in the store (resumed)
  size_t ok = 0, unstable = 0, oom = 0, error = 0;
  std::string device;  ///< DeviceRecord::key() the rows were written under
  double seconds = 0;  ///< wall time of the campaign
};

/// The environment row of a campaign: LibTorch and CUDA versions, threads,
/// dtype, git commit (SCALEDL_GIT_COMMIT or `git rev-parse` in the cwd), timing options.
nlohmann::json bench_environment(const torch::Device& dev, DType dtype, const TimingOptions& timing);

/// Times every config not yet in the store for (campaign, device) and writes
/// one row per config in its own transaction, so a killed run resumes where it
/// stopped. A failing config becomes a row with status "oom" or "error" and
/// its reason; the campaign goes on. Rows whose fwd or bwd is not stable()
/// get status "unstable" (docs/bench.md).
LayerCampaignSummary run_layer_campaign(const std::vector<LayerConfig>& configs, Store& store,
                                        const LayerCampaignOptions& opt);

}  // namespace scaledl
