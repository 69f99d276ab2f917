#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The feature vector of one layer instance for the per-layer regressors phi_l
// (ScaleDL eq. 6-7, PreNeT §3):
//
//   x = h^struct || h^hp || h^dev || h^cm || (CT, CM, roofline, AI)
//
//   h^struct  the type's dims (layer_info(type).dims, e.g. tokens, d_in, d_out, bias);
//             the batch-like sizes h^hp (tokens, batch, rows, elements) are among them
//   dtype     bytes per element, direction 0 = fwd, 1 = bwd, 2 = optimizer update
//   h^dev     DeviceRecord::features(): GFLOP/s, GB/s, cores/SMs, clock, memory, L2
//   h^cm      layer_cost(): FLOP of this direction, params, in/out/weight/temp bytes,
//             and the bytes moved in this direction (traffic_bytes)
//   CT        flops / compute rate, ms (PreNeT "CT"); CM = traffic_bytes / bandwidth, ms;
//             roofline = max(CT, CM), ms; AI = flops / traffic_bytes, FLOP/byte
//   transfer  (FeatureOptions::transfer) what the shape becomes on this device: the
//             GEMM's output tiles of 128x128 and 64x64, waves = ceil(tiles / SMs)
//             and the efficiency of the last wave tiles / (waves * SMs); for other
//             layers the same over blocks of 1,024 output elements, 8 blocks per SM;
//             the working set over L2 and the arithmetic intensity over the
//             device's ridge point (GFLOP/s / GB/s). All determined by a spec sheet.
//   arch      (FeatureOptions::arch) the FP32 lanes per SM, spec peak / (2 x SMs x boost
//             clock): 64 on Pascal GP100, Volta, Turing and the A100, 128 on GP104 (P4),
//             GA10x, Ada and Hopper, whose FP32 GEMMs reach a smaller share of the peak
//             (docs/unseen-gpu.md). 0 where the record has no spec peak (CPU probes).
//   alignment (FeatureOptions::alignment) gemm_align: the largest power of two (at most 16)
//             dividing every GEMM dimension (M, N, K; for other layers the innermost
//             dim); pre_volta: 1 on a GPU of compute capability below 7.0 (Pascal), else
//             0 (also where the record gives none). Pascal's FP32 GEMMs whose dimensions
//             are not multiples of 4 reach 20-60 % of the peak, Volta's and later ones'
//             75-90 % (docs/unseen-gpu.md, "Odd shapes and the T4's clock").
//
// Kernel names, grid or block sizes of a measurement are outcomes, never features.
// Every column is a float; no column is ever missing for a valid input.
#include <cstdint>
#include <string>
#include <vector>

#include "scaledl/io/device.hpp"
#include "scaledl/ir/layer_types.hpp"

namespace scaledl {

struct FeatureOptions {
  /// include the PreNeT roofline columns ct_ms, cm_ms, roofline_ms, arith_intensity
  bool roofline = true;
  /// include the tiling / wave-quantisation and device-relative columns (see above)
  bool transfer = false;
  /// include h^dev (DeviceRecord::features()) as columns; false: the device enters
  /// only through the roofline and the transfer columns, so the trees cannot learn
  /// device identities (a held-out GPU would fall on one training GPU's leaves)
  bool device = true;
  /// include the FP32 lanes per SM (see above)
  bool arch = false;
  /// include gemm_align and pre_volta (see above)
  bool alignment = false;
  /// rooflines at the spec peak of the row's dtype (rate_gflops): the roofline columns,
  /// the arithmetic intensity over the ridge and the target's roofline. Then a BF16
  /// row's target is its share of the tensor-core peak, as an FP32 row's is of the FP32
  /// peak; false: every dtype at the FP32 rate (models before 2026-11-27)
  bool dtype_rates = false;
};

/// The spec-sheet peak of `dtype` (GFLOP/s) at the boost clock: FP32 peak_fp32_gflops, TF32
/// peak_tf32_gflops, BF16 and FP16 peak_bf16_gflops, FP8 peak_fp8_gflops or, on a part without FP8
/// tensor cores (Ampere, Intel B60, which run it as BF16), peak_bf16_gflops; 0 = not on the record.
double dtype_peak_gflops(const DeviceRecord& dev, DType dtype);

/// The compute rate (GFLOP/s) a roofline of `dtype` uses: the record's FP32 rate
/// (DeviceRecord::compute_gflops), or with `dtype_rates` the spec peak of the dtype
/// (TF32: peak_tf32_gflops; BF16 and FP16: peak_bf16_gflops, which holds the FP16
/// tensor rate on GPUs without BF16) scaled like the FP32 rate (sustained / boost).
/// The FP32 rate where the record has no peak for the dtype.
double rate_gflops(const DeviceRecord& dev, DType dtype, bool dtype_rates);

/// 1 for a GPU of compute capability below 7.0 (Pascal and older), else 0 (also for a
/// record without one: CPUs, and GPUs the user describes are Volta or newer).
double pre_volta(const DeviceRecord& dev);

/// FP32 lanes per SM from a record's spec: peak_fp32_gflops / (2 x cores x clock_mhz),
/// rounded to a whole lane; 0 where any of the three is unknown.
double fp32_lanes_per_sm(const DeviceRecord& dev);

/// GEMM view of a layer: batch x [m x k] . [k x n] (Linear, BMM, Attention's QK^T,
/// the patch convolution); false for layers that are not one GEMM.
bool gemm_shape(LayerType t, const int64_t* dims, double& batch, double& m, double& n, double& k);

/// Bytes a straightforward kernel moves in direction `dir` (LayerCost fields):
/// fwd: in + out + weight + temp (read X, W; write Y; masks/statistics);
/// bwd: read dY (out), X (in), W, temps; write dX (in), dW (weight)
///      = 2*in + out + 2*weight + temp;
/// update (optimizer): read and write params + state, read grads = 2*weight + in.
double traffic_bytes(const LayerCost& c, Direction dir);
/// FLOP in direction `dir`: fwd and update use flops_fwd, bwd uses flops_bwd.
double direction_flops(const LayerCost& c, Direction dir);

/// Roofline time max(CT, CM), ms, with CT = FLOP / rate_gflops(dev, dtype, dtype_rates)
/// and CM = traffic_bytes / bandwidth_gbs (1 GFLOP/s = 1e6 FLOP/ms). Validates dims.
double roofline_ms(LayerType t, const std::vector<int64_t>& dims, DType dtype, Direction dir,
                   const DeviceRecord& dev, bool dtype_rates = false);

/// Column names of the feature vector of type `t`, in order.
std::vector<std::string> feature_names(LayerType t, const FeatureOptions& o = {});
size_t feature_count(LayerType t, const FeatureOptions& o = {});

/// Writes feature_count(t, o) floats to `out`. Throws Error on invalid dims, a
/// direction the type does not have (Update only for Optimizer and vice versa),
/// or a device without compute rate / bandwidth.
void layer_features(LayerType t, const std::vector<int64_t>& dims, DType dtype, Direction dir,
                    const DeviceRecord& dev, const FeatureOptions& o, float* out);
/// Same, without re-validating dims (hot path: the caller validated them).
void layer_features_unchecked(LayerType t, const int64_t* dims, DType dtype, Direction dir,
                              const DeviceRecord& dev, const FeatureOptions& o, float* out);

/// Hot path for many rows of one (type, dtype, direction, device): checks the
/// direction and the device once, caches h^dev, and computes layer_cost() once per
/// row for both the features and the roofline. Allocates nothing per row.
class FeatureWriter {
 public:
  FeatureWriter(LayerType t, DType dtype, Direction dir, const DeviceRecord& dev, const FeatureOptions& o);
  /// feature_count(t, o)
  size_t size() const { return count_; }
  /// Validates `dims` (layer_info(t).dims.size() values; Error as validate_dims),
  /// writes size() floats to `out` (nullptr: none) and returns roofline_ms.
  double write(const int64_t* dims, float* out);
  /// The FLOP of the row last written at the spec-sheet peak of its dtype (ms): no kernel
  /// runs faster. 0 where the record has no such peak (CPU probes), so no bound there.
  double peak_floor_ms() const { return peak_floor_ms_; }
  /// The row last written at its dtype's roofline: max(FLOP at the spec peak of the
  /// dtype, traffic at the bandwidth); without that peak, what write() returned.
  double dtype_roofline_ms() const { return dtype_roofline_ms_; }

 private:
  LayerType t_;
  DType dtype_;
  Direction dir_;
  FeatureOptions o_;
  size_t count_ = 0;
  double gflops_ = 0, bw_ = 0;  ///< device rates per ms (x 1e6)
  double peak_ = 0;             ///< spec-sheet peak of dtype_, GFLOP/s; 0 = unknown
  double peak_floor_ms_ = 0;
  double dtype_roofline_ms_ = 0;
  std::vector<double> dev_;  ///< DeviceRecord::features()
  double lanes_ = 0;         ///< fp32_lanes_per_sm(dev)
  double pre_volta_ = 0;     ///< pre_volta(dev)
  std::vector<int64_t> d_;   ///< scratch dims (validate_dims and layer_cost take a vector)
};

/// Checks that `dir` is a direction type `t` has; throws naming both otherwise.
void check_direction(LayerType t, Direction dir);

}  // namespace scaledl
