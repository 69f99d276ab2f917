// Feature vectors of layer instances (see layer_features.hpp for the columns).
#include "scaledl/learn/layer_features.hpp"

#include <algorithm>
#include <cmath>

#include "scaledl/core/error.hpp"

namespace scaledl {

namespace {
// Columns after the dims; keep in the order layer_features_unchecked writes them.
const std::vector<std::string> kCommon = {"dtype_bytes", "direction"};
const std::vector<std::string> kCost = {"flops",        "params",     "in_bytes",     "out_bytes",
                                        "weight_bytes", "temp_bytes", "traffic_bytes"};
const std::vector<std::string> kRoofline = {"ct_ms", "cm_ms", "roofline_ms", "arith_intensity"};
const std::vector<std::string> kTransfer = {"tiles_128", "waves_128",   "wave_eff_128", "tiles_64",
                                            "waves_64",  "wave_eff_64", "ws_over_l2",   "ai_over_ridge"};
const std::vector<std::string> kArch = {"fp32_lanes_per_sm"};
const std::vector<std::string> kAlign = {"gemm_align", "pre_volta"};

/// The largest power of two, at most 16, dividing `v` (1 for an odd one).
double pow2_align(double v) {
  double a = 1;
  while (a < 16 && std::fmod(v, 2 * a) == 0) a *= 2;
  return a;
}

/// Tiles of t x t over the output, waves over `sms` slots, efficiency of the waves.
void waves(double batch, double m, double n, double t, double slots, float*& p) {
  const double tiles = batch * std::ceil(m / t) * std::ceil(n / t);
  const double w = std::ceil(tiles / std::max(1.0, slots));
  *p++ = static_cast<float>(tiles);
  *p++ = static_cast<float>(w);
  *p++ = static_cast<float>(w > 0 ? tiles / (w * std::max(1.0, slots)) : 0.0);
}
}  // namespace

bool gemm_shape(LayerType t, const int64_t* d, double& batch, double& m, double& n, double& k) {
  switch (t) {
    case LayerType::Linear:
      batch = 1, m = double(d[0]), n = double(d[2]), k = double(d[1]);
      return true;
    case LayerType::BMM:
      batch = double(d[0]), m = double(d[1]), n = double(d[3]), k = double(d[2]);
      return true;
    case LayerType::Attention:
      batch = double(d[0]) * double(d[1]), m = double(d[2]), n = double(d[3]), k = double(d[4]);
      return true;
    case LayerType::FlashAttention:  // one tile row of queries per block, each looping over the keys
      batch = double(d[0]) * double(d[1]), m = double(d[3]), n = double(d[6]), k = double(d[4]);
      return true;
    case LayerType::Conv2dPatch: {
      const double g = std::floor(double(d[3]) / double(d[4]));
      batch = 1, m = double(d[0]) * g * g, n = double(d[2]), k = double(d[1]) * double(d[4]) * double(d[4]);
      return true;
    }
    case LayerType::Embedding:
    case LayerType::LayerNorm:
    case LayerType::RMSNorm:
    case LayerType::Softmax:
    case LayerType::Dropout:
    case LayerType::GELU:
    case LayerType::ReLU:
    case LayerType::SiLU:
    case LayerType::Add:
    case LayerType::Mul:
    case LayerType::CrossEntropy:
    case LayerType::Optimizer:
    case LayerType::Pointwise:
      return false;  // not a matrix product
  }
  return false;
}

double fp32_lanes_per_sm(const DeviceRecord& dev) {
  if (dev.peak_fp32_gflops <= 0 || dev.cores <= 0 || dev.clock_mhz <= 0) return 0;
  return std::round(dev.peak_fp32_gflops * 1e3 / (2.0 * double(dev.cores) * dev.clock_mhz));
}

double pre_volta(const DeviceRecord& dev) {
  const double cc = dev.compute_capability();
  return cc > 0 && cc < 7.0 ? 1.0 : 0.0;
}

double traffic_bytes(const LayerCost& c, Direction dir) {
  switch (dir) {
    case Direction::Forward:
      return c.in_bytes + c.out_bytes + c.weight_bytes + c.temp_bytes;
    case Direction::Backward:
      return 2 * c.in_bytes + c.out_bytes + 2 * c.weight_bytes + c.temp_bytes;
    case Direction::Update:
      return 2 * c.weight_bytes + c.in_bytes;
  }
  return 0;
}

double direction_flops(const LayerCost& c, Direction dir) {
  return dir == Direction::Backward ? c.flops_bwd : c.flops_fwd;
}

void check_direction(LayerType t, Direction dir) {
  const bool opt = t == LayerType::Optimizer;
  SCALEDL_CHECK(opt == (dir == Direction::Update),
                "direction={} is not valid for layer type {} (optimizer rows are 'update', all others "
                "'fwd' or 'bwd')",
                to_string(dir), to_string(t));
}

double dtype_peak_gflops(const DeviceRecord& dev, DType dtype) {
  switch (dtype) {
    case DType::FP32:
      return dev.peak_fp32_gflops;
    case DType::TF32:
      return dev.peak_tf32_gflops;
    case DType::BF16:
    case DType::FP16:
      return dev.peak_bf16_gflops;
    case DType::FP8:
      return dev.peak_fp8_gflops > 0 ? dev.peak_fp8_gflops : dev.peak_bf16_gflops;
  }
  return 0;
}

double rate_gflops(const DeviceRecord& dev, DType dtype, bool dtype_rates) {
  const double fp32 = dev.compute_gflops();
  if (!dtype_rates || dev.peak_fp32_gflops <= 0 || dtype == DType::FP32) return fp32;
  const double peak = dtype_peak_gflops(dev, dtype);
  return peak > 0 ? peak * fp32 / dev.peak_fp32_gflops : fp32;
}

double roofline_ms(LayerType t, const std::vector<int64_t>& dims, DType dtype, Direction dir,
                   const DeviceRecord& dev, bool dtype_rates) {
  validate_dims(t, dims);
  check_direction(t, dir);
  SCALEDL_CHECK(dev.compute_gflops() > 0 && dev.bandwidth_gbs() > 0,
                "device \"{}\" has no compute rate or bandwidth: cannot compute the roofline", dev.key());
  LayerCost c = layer_cost(t, dims, dtype);
  double ct = direction_flops(c, dir) / (rate_gflops(dev, dtype, dtype_rates) * 1e6);
  double cm = traffic_bytes(c, dir) / (dev.bandwidth_gbs() * 1e6);
  return std::max(ct, cm);
}

std::vector<std::string> feature_names(LayerType t, const FeatureOptions& o) {
  std::vector<std::string> n;
  for (const auto& d : layer_info(t).dims) n.push_back("dim_" + d);
  n.insert(n.end(), kCommon.begin(), kCommon.end());
  if (o.device) n.insert(n.end(), DeviceRecord::feature_names().begin(), DeviceRecord::feature_names().end());
  n.insert(n.end(), kCost.begin(), kCost.end());
  if (o.roofline) n.insert(n.end(), kRoofline.begin(), kRoofline.end());
  if (o.transfer) n.insert(n.end(), kTransfer.begin(), kTransfer.end());
  if (o.arch) n.insert(n.end(), kArch.begin(), kArch.end());
  if (o.alignment) n.insert(n.end(), kAlign.begin(), kAlign.end());
  return n;
}

size_t feature_count(LayerType t, const FeatureOptions& o) {
  return layer_info(t).dims.size() + kCommon.size() + (o.device ? DeviceRecord::feature_names().size() : 0) +
         kCost.size() + (o.roofline ? kRoofline.size() : 0) + (o.transfer ? kTransfer.size() : 0) +
         (o.arch ? kArch.size() : 0) + (o.alignment ? kAlign.size() : 0);
}

void layer_features(LayerType t, const std::vector<int64_t>& dims, DType dtype, Direction dir,
                    const DeviceRecord& dev, const FeatureOptions& o, float* out) {
  validate_dims(t, dims);
  check_direction(t, dir);
  SCALEDL_CHECK(dev.compute_gflops() > 0 && dev.bandwidth_gbs() > 0,
                "device \"{}\" has no compute rate or bandwidth (set peak_fp32_gflops and peak_mem_bw_gbs)",
                dev.key());
  layer_features_unchecked(t, dims.data(), dtype, dir, dev, o, out);
}

namespace {
/// The columns from a precomputed cost and h^dev (`devf` = DeviceRecord::features()).
void write_features(LayerType t, const int64_t* dims, size_t nd, DType dtype, Direction dir,
                    const LayerCost& c, const double* devf, double gflops, double bw, double lanes,
                    double pre_volta, const FeatureOptions& o, float* out) {
  float* p = out;
  for (size_t i = 0; i < nd; ++i) *p++ = static_cast<float>(dims[i]);
  *p++ = static_cast<float>(dtype_bytes(dtype));
  *p++ = static_cast<float>(static_cast<int>(dir));
  const size_t ndev = DeviceRecord::feature_names().size();  // h^dev, DeviceRecord::feature_names()
  if (o.device)
    for (size_t i = 0; i < ndev; ++i) *p++ = static_cast<float>(devf[i]);
  const double fl = direction_flops(c, dir), tb = traffic_bytes(c, dir);
  *p++ = static_cast<float>(fl);
  *p++ = static_cast<float>(c.params);
  *p++ = static_cast<float>(c.in_bytes);
  *p++ = static_cast<float>(c.out_bytes);
  *p++ = static_cast<float>(c.weight_bytes);
  *p++ = static_cast<float>(c.temp_bytes);
  *p++ = static_cast<float>(tb);
  if (o.roofline) {
    const double ct = fl / (gflops * 1e6), cm = tb / (bw * 1e6);
    *p++ = static_cast<float>(ct);
    *p++ = static_cast<float>(cm);
    *p++ = static_cast<float>(std::max(ct, cm));
    *p++ = static_cast<float>(tb > 0 ? fl / tb : 0.0);
  }
  if (o.transfer) {
    const double sms = devf[2], l2_bytes = devf[5] * 1e6;  // DeviceRecord::features(): cores, l2_mb
    double b = 0, m = 0, n = 0, k = 0;
    if (gemm_shape(t, dims, b, m, n, k)) {
      waves(b, m, n, 128, sms, p);
      waves(b, m, n, 64, sms, p);
    } else {  // blocks of 1,024 output elements (256 threads x 4), 8 resident blocks per SM
      const double elems = std::max(1.0, c.out_bytes / dtype_bytes(dtype));
      waves(1, elems, 1, 1024, 8 * sms, p);
      waves(1, elems, 1, 4096, 8 * sms, p);
    }
    *p++ = static_cast<float>(l2_bytes > 0 ? tb / l2_bytes : 0.0);
    *p++ = static_cast<float>(tb > 0 && bw > 0 ? (fl / tb) / (gflops / bw) : 0.0);
  }
  if (o.arch) *p++ = static_cast<float>(lanes);
  if (o.alignment) {
    double b = 0, m = 0, n = 0, k = 0;
    *p++ = static_cast<float>(gemm_shape(t, dims, b, m, n, k)
                                  ? std::min({pow2_align(m), pow2_align(n), pow2_align(k)})
                                  : pow2_align(double(dims[nd - 1])));
    *p++ = static_cast<float>(pre_volta);
  }
}
}  // namespace

void layer_features_unchecked(LayerType t, const int64_t* dims, DType dtype, Direction dir,
                              const DeviceRecord& dev, const FeatureOptions& o, float* out) {
  const size_t nd = layer_info(t).dims.size();
  write_features(t, dims, nd, dtype, dir, layer_cost(t, std::vector<int64_t>(dims, dims + nd), dtype),
                 dev.features().data(), rate_gflops(dev, dtype, o.dtype_rates), dev.bandwidth_gbs(),
                 fp32_lanes_per_sm(dev), pre_volta(dev), o, out);
}

FeatureWriter::FeatureWriter(LayerType t, DType dtype, Direction dir, const DeviceRecord& dev,
                             const FeatureOptions& o)
    : t_(t),
      dtype_(dtype),
      dir_(dir),
      o_(o),
      count_(feature_count(t, o)),
      dev_(dev.features()),
      lanes_(fp32_lanes_per_sm(dev)),
      pre_volta_(pre_volta(dev)),
      d_(layer_info(t).dims.size()) {
  check_direction(t, dir);
  SCALEDL_CHECK(dev.compute_gflops() > 0 && dev.bandwidth_gbs() > 0,
                "device \"{}\" has no compute rate or bandwidth (set peak_fp32_gflops and peak_mem_bw_gbs)",
                dev.key());
  gflops_ = rate_gflops(dev, dtype, o.dtype_rates);
  bw_ = dev.bandwidth_gbs();
  // The boost-clock peak: an upper bound on any clock (TF32 at the FP32 peak where a record has none).
  peak_ = dtype_peak_gflops(dev, dtype);
  if (dtype == DType::TF32 && peak_ <= 0) peak_ = dev.peak_fp32_gflops;
}

double FeatureWriter::write(const int64_t* dims, float* out) {
  std::copy(dims, dims + d_.size(), d_.begin());
  validate_dims(t_, d_);
  const LayerCost c = layer_cost(t_, d_, dtype_);
  if (out)
    write_features(t_, dims, d_.size(), dtype_, dir_, c, dev_.data(), gflops_, bw_, lanes_, pre_volta_, o_,
                   out);
  peak_floor_ms_ = peak_ > 0 ? direction_flops(c, dir_) / (peak_ * 1e6) : 0;
  const double memory_ms = traffic_bytes(c, dir_) / (bw_ * 1e6);
  const double roof = std::max(direction_flops(c, dir_) / (gflops_ * 1e6), memory_ms);
  dtype_roofline_ms_ = peak_ > 0 ? std::max(peak_floor_ms_, memory_ms) : roof;
  return roof;
}

}  // namespace scaledl
