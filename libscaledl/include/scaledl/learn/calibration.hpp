#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// A device's layer times corrected by a few of its own layer timings: a short
// calibration benchmark on a GPU the layer models never saw (docs/unseen-gpu.md,
// "A short calibration benchmark").
//
// For each (layer type, direction, dtype) with enough usable rows, the factor is
// exp(median of log(measured / predicted)) over those rows, the prediction being the
// layer models' for the device record that `predict` uses. Usable rows are the ones
// a model's layers resemble: GEMMs whose M, N and K are multiples of `align` (model
// widths are; the random shapes of operator benchmarks mostly are not, and a GPU
// may pay for odd shapes in its own way), and rows above the host's timing floor.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/io/device.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

struct CalibrationOptions {
  /// Rows faster than this (ms; kernel time when the layer models learn kernel
  /// times) are not used: the host's timing floor sets them. >= 0.
  double min_ms = 0.05;
  /// GEMM rows (linear, bmm, attention, patch conv) need M, N and K multiples of this. >= 1.
  int64_t align = 8;
  /// A (type, direction, dtype) with fewer usable rows gets no factor. >= 1.
  int64_t min_rows = 3;
  /// > 0: at most this many usable rows per (type, direction, dtype), drawn at random
  /// with `seed` (what eval --calibrate-rows simulates); 0 = all.
  int64_t max_rows = 0;
  uint64_t seed = 0;
  void validate() const;
};

struct CalibrationFactor {
  double log_factor = 0;  ///< median of log(measured / predicted)
  int64_t rows = 0;       ///< usable rows it came from
};

struct LayerCalibration {
  std::string device;   ///< DeviceRecord::key() of the record the factors are relative to
  std::string source;   ///< where the rows came from (a store's path), for reports
  int64_t rows_in = 0;  ///< rows given
  std::map<std::tuple<LayerType, Direction, DType>, CalibrationFactor> factors;
  /// Why these factors may not hold for the device ("" = no known reason): a card of
  /// <= 75 W (its record's extra.tdp_w) may not hold, through a long run, the clock its
  /// operators were timed at (docs/unseen-gpu.md, "A short calibration benchmark").
  std::string caution;

  /// The factor of (t, dir, dtype); a backward kind without one of its own takes its
  /// forward kind's (operator sets such as NeuSight's time the forward only); 1 where
  /// the calibration has neither.
  double factor(LayerType t, Direction dir, DType dtype) const;
  /// Usable rows behind the factors.
  int64_t rows_used() const;
  /// Multiplies each node time of `g` (index = node id) by its factor.
  void apply(const LayerGraph& g, std::vector<double>& node_ms) const;
  /// {"device", "source", "rows_in", "rows_used", "factors": {"linear.fwd.fp32": {"factor", "rows"}, ...}}
  nlohmann::json to_json() const;
};

/// A spec record's extra.tdp_w (W); 0 where it gives none.
double tdp_watts(const DeviceRecord& dev);

/// What a prediction on `dev` assumes of its clock, for `predict` ("" = nothing to say):
/// a GPU spec with a sustained clock runs its compute rooflines at sustained / boost of the
/// peak; one of <= 75 W without it is assumed to hold its boost clock, which such cards do
/// not under load (a T4 is reported at ~900 MHz of its 1,590: docs/unseen-gpu.md, "Odd
/// shapes and the T4's clock"), so its prediction may be too fast where compute binds.
std::string clock_note(const DeviceRecord& dev);

/// Factors for device `dev` from `rows` (every row's device must be `dev` by name;
/// with TrainOptions::kernel_time of `lp`, each row less the host's timing floor, as the
/// layer models learnt: the fastest of `rows`, at most 60 us). Error when no (type,
/// direction, dtype) has min_rows usable rows.
LayerCalibration calibrate_layers(const LayerPredictor& lp, const std::vector<LayerSample>& rows,
                                  const DeviceRecord& dev, const CalibrationOptions& o = {});

/// calibrate_layers() on the layer rows of store `db` (status ok) whose device has
/// `dev`'s name, whatever its kind (a probe's "cuda:NAME" rows calibrate "spec:NAME").
/// Error naming `what` (the option) and the store's devices when it has no such rows.
LayerCalibration calibrate_from_store(const LayerPredictor& lp, const std::string& db,
                                      const DeviceRecord& dev, const CalibrationOptions& o = {},
                                      const std::string& what = "--calibrate");

}  // namespace scaledl
