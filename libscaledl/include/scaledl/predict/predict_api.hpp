#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// `predict` as a library: what `scaledl predict` does, for the CLI, `scale`, `eval` and a future
// Python module alike (docs/predict.md). A PredictRequest says what to predict (a model config and
// settings, or a --sweep / --csv of them; the models; the device; the parallel degrees); then
//   default_device(req)            the device of every configuration (--device-spec or --db)
//   load_predict_bundle(req, dev)  the models, with --comm, --host-node-us, --calibrate and the
//                                  anchor rule (measured runs drop the device-out refinement)
// and one of
//   predict_single                 one configuration on one device  -> SinglePrediction
//   predict_parallel_single        one configuration on --gpus N    -> ParallelSingle
//   predict_sweep                  many, streamed in chunks         -> PredictRow per configuration
// Each result has its JSON (to_json) and its text report (write_report); a PredictRow is one row
// of the one output schema of many configurations (to_json, to_csv; RowWriter streams them).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/io/device.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/memory/memory.hpp"
#include "scaledl/predict/device_intervals.hpp"
#include "scaledl/predict/domain.hpp"
#include "scaledl/predict/model_request.hpp"
#include "scaledl/predict/parallel.hpp"
#include "scaledl/predict/predict.hpp"

namespace scaledl {

struct Bundle;

/// Everything `scaledl predict` is asked (its options, docs/predict.md).
struct PredictRequest {
  ModelRequest args;        ///< model config and training settings
  std::string bundle;       ///< bundle directory (`scaledl train --out`)
  std::string layers;       ///< LayerPredictor directory (`train layers --out`), instead of bundle
  std::string graph;        ///< graph model file or directory (`train graph --out`); "" = no refinement
  std::string device_spec;  ///< device spec JSON (NeuSight device_configs or ScaleDL format)
  std::string db;           ///< store holding probed device records
  std::string device;       ///< device key in db (e.g. "cpu:..."); "" = its only device
  int64_t devices = 1;      ///< data-parallel devices N, >= 1
  std::string comm;         ///< all-reduce calibration JSON (needed when N > 1)
  std::string fabric;       ///< --fabric NAME|FILE: a fabric preset (models/fabrics); "" = the spec's own
  int64_t samples = 0;      ///< training samples per epoch (0 = use iterations)
  int64_t iterations = 0;   ///< iterations per epoch I (0 = from samples)
  std::vector<std::string> sweeps;     ///< "KEY=V1,V2,...": predict the cartesian product
  std::string csv;                     ///< CSV of configurations, one per row
  std::string anchor;                  ///< CSV of configurations measured on this device (+ measured_ms)
  bool raw = false;                    ///< the models' own T_iter, without the physical bounds
  ParallelConfig par;                  ///< gpus, nodes, tp, pp, ep, microbatches, zero, recompute
  bool par_given = false;              ///< any of those was given: a parallel prediction
  double headroom = 0.10;              ///< fraction of device memory kept free for the fits verdict
  bool keep_outputs = false;           ///< the loop holds the logits through the backward (MemoryOptions)
  std::optional<double> host_node_us;  ///< the host's cost per graph node, us (none: the bundle's)
  /// The framework launches each iteration as CUDA graphs: no host cost per node (--host-node-us 0,
  /// whatever the bundle's fit or the framework's default says).
  bool cuda_graphs = false;
  std::string calibrate;  ///< store with a few layer timings of the device
  /// A price table (models/prices.json's schema) for the rows' cost of an epoch; "" = the shipped one.
  std::string prices;

  /// --sweep or --csv: many configurations.
  bool many() const { return !sweeps.empty() || !csv.empty(); }
  /// What is predicted: a sweep or a CSV, not both; a model unless a CSV names them.
  void check_inputs() const;
  /// The numbers: devices, samples, iterations, headroom, and --comm for N > 1.
  void check_ranges() const;
  /// A parallel prediction (par_given) is of one configuration on one device kind: no sweep or
  /// CSV, no --devices, no --anchor.
  void check_parallel() const;
};

/// The device of --device-spec or --db (with --device, else the store's only one).
DeviceRecord resolve_device(const PredictRequest& req);
/// resolve_device, or none for a sweep or CSV without --device-spec / --db (each configuration
/// names its device_spec).
std::optional<DeviceRecord> default_device(const PredictRequest& req);

/// The bundle (or layers + graph) with what the request adds: the cluster's --comm, the host's
/// --host-node-us, a --calibrate of `dev`, and the anchor rule (measured runs set the device's
/// bias; the in-domain refinement predicts better once it is removed, so the device-out one is
/// dropped). Throws Error naming the conflicting options.
Bundle load_predict_bundle(const PredictRequest& req, const std::optional<DeviceRecord>& dev);

/// --host-node-us and --cuda-graphs on a bundle: the host's cost per graph node every device
/// then takes (CUDA graphs: none). Both with a cost above 0 is an Error naming them.
void apply_host_options(Bundle& b, const std::optional<double>& host_node_us, bool cuda_graphs);

/// The collectives a parallel prediction prices, and where they come from.
struct ClusterCommChoice {
  ClusterComm comm;
  std::string source;                  ///< one line for the report ("" = none: nothing calibrated)
  std::optional<FabricPreset> fabric;  ///< the preset, when one was used
};
/// In this order: the bundle's comm_given (`--comm FILE`; with a non-empty `fabric` too, an
/// Error: give one), the preset `fabric` names (a name in `spec_path`'s ../fabrics or
/// models/fabrics, or a file), the preset whose `devices` name this GPU (default_fabric_for in
/// the same directories), the bundle's own calibration, else none (comm.intra has no bandwidth:
/// the parallel prediction then asks for one).
ClusterCommChoice choose_cluster_comm(const Bundle& b, const std::string& fabric,
                                      const std::string& spec_path, const DeviceRecord& dev);

/// The warning for layer models trained before rooflines used a probed GPU's spec peak ("" = none).
std::string stale_rates_warning(const Bundle& b, const std::optional<DeviceRecord>& dev);

/// --anchor: the device's bias from the measured configurations (nullopt without --anchor).
/// A run counts only for the device it was measured on and only if no faster than its roofline.
std::optional<AnchorFit> request_anchor(const PredictRequest& req, const Bundle& b, const DeviceRecord& dev);

// ---- one configuration -------------------------------------------------------------------------

/// One configuration on one device, and what its report says.
struct SinglePrediction {
  ModelSpec model;
  TrainSettings settings;
  std::vector<std::string> assumed;  ///< ModelRequest::assumed_settings
  DeviceRecord device;
  size_t nodes = 0;  ///< layer graph nodes
  IterationPrediction p;
  std::optional<AnchorFit> anchor;
  std::vector<OutOfRange> outside;  ///< Bundle::out_of_range
  std::string host_warning;         ///< host_bound_warning ("" = none)
  std::string gemm_warning;         ///< misaligned_gemm_warning ("" = none)
  int64_t iterations = 0;           ///< per epoch (0 = neither samples nor iterations given)
  MemoryPrediction memory;
  std::string host_source;  ///< where the host term comes from (Bundle::host_node_source)
  /// What the caller's host input pipeline bound adds (issue #15): keys of to_json and lines
  /// of the report after the intervals (both empty = none).
  nlohmann::json input = nlohmann::json::object();
  std::string input_text;

  nlohmann::json to_json(const Bundle& b) const;
  /// The text report of `scaledl predict`.
  void write_report(std::ostream& out, const Bundle& b) const;
};

SinglePrediction predict_single(const PredictRequest& req, const Bundle& b, const DeviceRecord& dev);

/// One configuration on req.par (--gpus, --tp, --pp, ...): the composition of parallel.hpp,
/// anchored to the single-GPU prediction, and the per-GPU memory.
struct ParallelSingle {
  ModelSpec model;
  TrainSettings settings;
  std::vector<std::string> assumed;
  DeviceRecord device;
  ParallelConfig par;       ///< req.par with the device's host term
  std::string host_source;  ///< where that host term comes from (Bundle::host_node_source)
  ParallelPrediction r;
  std::string host_warning, comm_warning;
  std::string comm_source;  ///< ClusterCommChoice::source
  int64_t iterations = 0;
  ParallelMemory memory;  ///< per GPU, analytic
  double capacity_bytes = 0, headroom = 0.10;
  std::string verdict;                              ///< memory_verdict
  nlohmann::json input = nlohmann::json::object();  ///< as SinglePrediction::input
  std::string input_text;

  nlohmann::json to_json() const;
  void write_report(std::ostream& out) const;
};

/// Throws Error unless check_parallel() holds.
ParallelSingle predict_parallel_single(const PredictRequest& req, const Bundle& b, const DeviceRecord& dev);

// ---- many configurations: --sweep and --csv ---------------------------------------------------

/// One configuration of a sweep or CSV on its device: one row of the one schema.
struct PredictRow {
  std::string label;  ///< the model file's stem and its config.<key> overrides
  TrainSettings settings;
  std::string device;                        ///< its key
  int64_t iterations = 0;                    ///< per epoch (0 = not asked)
  std::string infeasible;                    ///< why the device cannot run it ("" = predicted; dtype_refusal)
  IterationPrediction p;                     ///< when feasible
  MemoryPrediction memory;                   ///< when feasible
  std::optional<int64_t> device_layer_rows;  ///< Bundle::layer_rows_of
  nlohmann::json calibration;                ///< the device's calibration (null = none)
  double price_per_gpu_hour = 0;             ///< the device's in the price table (0 = none)

  /// price x devices x epoch hours (0 without a price, an epoch or a prediction).
  double cost_per_epoch() const;

  nlohmann::json to_json() const;
  /// The CSV columns (model,batch,...,infeasible), no newline.
  static const std::string& csv_header();
  /// This row in those columns, no newline.
  std::string to_csv() const;
};

/// Writes rows as CSV (the header before the first) or as one JSON array (an element per row,
/// indented as nlohmann's dump(2) of the whole array), flushing after each chunk.
class RowWriter {
 public:
  RowWriter(std::ostream& out, bool json) : out_(out), json_(json) {}
  void write(const std::vector<PredictRow>& rows);
  /// Closes the JSON array ("[]" when no row came).
  void finish();

 private:
  std::ostream& out_;
  bool json_;
  bool first_ = true;
};

/// Configurations per chunk of a sweep or CSV: resolved, built, predicted and handed on before
/// the next, so memory stays that of one chunk whatever the sweep's size (a layer graph is
/// ~0.65 MB; a sweep of 10^6 configurations held whole needed 7.4 GB; 6,000 configurations of
/// GPT-2 in chunks of 512 peak at ~0.5 GB RSS).
constexpr size_t kSweepChunk = 512;

struct SweepStats {
  size_t total = 0;    ///< configurations
  double build_s = 0;  ///< parse + layer graphs
  double pred_s = 0;   ///< prediction
};

/// --sweep/--csv: every configuration, each on its device (its device_spec, else `dflt`), in
/// chunks of kSweepChunk, each chunk's rows to `on_chunk` in order. A bad value is named before
/// any chunk (each value of each sweep list and every CSV row is resolved up front); then
/// `on_total` (may be empty) hears the count. A configuration its device cannot run is a row
/// that says why.
SweepStats predict_sweep(const PredictRequest& req, const Bundle& b, const std::optional<DeviceRecord>& dflt,
                         const std::function<void(const std::vector<PredictRow>&)>& on_chunk,
                         const std::function<void(size_t total)>& on_total = {});

// ---- report pieces ---------------------------------------------------------------------------

/// "memory       12.3 GB peak (...); fits in 80.0 GB with 10 % headroom\n".
std::string memory_line(double peak, double lo80, double hi80, const std::string& how, double cap,
                        double headroom, const std::string& verdict);
/// The `calibration` line: how many rows of which store set which factors.
std::string calibration_line(const LayerCalibration& c);
/// The attention (and elementwise) kernels the graph costs: "eager" or "fused".
const char* attention_kind(const TrainSettings& s);

}  // namespace scaledl
