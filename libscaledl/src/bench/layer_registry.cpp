// Registry of layer microbenchmarks and time_layer(): forward and backward of
// one layer config timed separately (bench.hpp).
#include <algorithm>
#include <map>
#include <mutex>

#include "bench/memory_meter.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/core/error.hpp"

// One anchor per layer type (SCALEDL_REGISTER_LAYER_BENCH(<name>, ...) in src/bench/layer_*.cpp),
// from the rows of layer_types.hpp. Referencing them here keeps the linker from dropping those
// files from the static library, and a type without a microbenchmark fails to link.
#define SCALEDL_DECLARE_ANCHOR(E, name, ...) extern int scaledl_layer_bench_##name;
SCALEDL_LAYER_TYPES(SCALEDL_DECLARE_ANCHOR)
#undef SCALEDL_DECLARE_ANCHOR

namespace scaledl {

namespace {
std::map<LayerType, LayerBenchFactory>& registry() {
  static std::map<LayerType, LayerBenchFactory> r;
  return r;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
void touch_anchors() {
#define SCALEDL_USE_ANCHOR(E, name, ...) sum += scaledl_layer_bench_##name;
  volatile int sum = 0;
  SCALEDL_LAYER_TYPES(SCALEDL_USE_ANCHOR)
#undef SCALEDL_USE_ANCHOR
  (void)sum;
}
}  // namespace

int register_layer_bench(LayerType t, LayerBenchFactory f) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[t] = std::move(f);
  return 0;
}

std::unique_ptr<LayerBench> make_layer_bench(LayerType t) {
  touch_anchors();
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(t);
  SCALEDL_CHECK(it != registry().end(), "layer type {} has no microbenchmark", layer_info(t).name);
  return it->second();
}

std::vector<LayerType> registered_layer_benches() {
  touch_anchors();
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<LayerType> out;
  for (const auto& kv : registry()) out.push_back(kv.first);
  return out;
}

namespace {

/// One untimed forward (+ backward) call under the memory meter: base = inputs
/// and weights; saved = what the forward keeps beyond its output (autograd's
/// saved tensors and temporaries); peak = the highest allocation over forward,
/// the seed gradient and backward.
PeakMemory layer_memory(LayerBench& bench, LayerType t, const torch::Device& dev) {
  PeakMemory mem;
  synchronize(dev);
  const MemoryReading before = memory_meter_read(dev);
  if (before.method.empty()) return mem;
  memory_meter_reset_peak(dev);
  {
    torch::Tensor out = bench.forward();
    synchronize(dev);
    const double out_bytes = out.defined() ? static_cast<double>(out.numel() * out.element_size()) : 0.0;
    const MemoryReading fwd = memory_meter_read(dev);
    mem.saved_bytes = std::max(0.0, fwd.current_bytes - before.current_bytes - out_bytes);
    auto inputs = bench.grad_inputs();
    if (layer_info(t).has_backward && !inputs.empty() && out.defined() && out.requires_grad()) {
      torch::Tensor g = out.dim() == 0 ? torch::ones_like(out) : torch::randn_like(out);
      (void)torch::autograd::grad({out}, inputs, {g}, /*retain_graph=*/false, /*create_graph=*/false,
                                  /*allow_unused=*/true);
    }
    synchronize(dev);
  }
  const MemoryReading after = memory_meter_read(dev);
  mem.base_bytes = before.current_bytes;
  mem.peak_bytes = std::max(after.peak_bytes, before.current_bytes);
  mem.method = after.method;
  return mem;
}

}  // namespace

LayerTiming time_layer(LayerType t, const std::vector<int64_t>& dims, DType dtype, const torch::Device& dev,
                       const TimingOptions& opt) {
  validate_dims(t, dims);
  apply_dtype_mode(dtype);
  memory_meter_install(dev);  // before setup: inputs and weights are counted
  torch::manual_seed(0);
  auto bench = make_layer_bench(t);
  bench->setup(dims, dtype, dev);
  synchronize(dev);

  LayerTiming r;
  // Forward with autograd recording (as in training); the graph is freed when
  // the output goes out of scope at the end of each call.
  r.fwd = measure([&] { (void)bench->forward(); }, dev, opt);

  auto inputs = bench->grad_inputs();
  if (layer_info(t).has_backward && !inputs.empty()) {
    torch::Tensor out = bench->forward();
    SCALEDL_CHECK(out.defined() && out.requires_grad(), "{}: forward output does not require grad",
                  layer_info(t).name);
    torch::Tensor g = out.dim() == 0 ? torch::ones_like(out) : torch::randn_like(out);
    // autograd::grad returns fresh gradients instead of accumulating into .grad,
    // so every launch does exactly the backward kernels of this layer.
    r.bwd = measure(
        [&] {
          (void)torch::autograd::grad({out}, inputs, {g}, /*retain_graph=*/true, /*create_graph=*/false,
                                      /*allow_unused=*/true);
        },
        dev, opt);
    r.has_bwd = true;
  }
  r.memory = layer_memory(*bench, t, dev);
  return r;
}

}  // namespace scaledl
