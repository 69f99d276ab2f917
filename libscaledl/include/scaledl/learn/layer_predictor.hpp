#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Per-layer-type regressors phi_l of ScaleDL eq. 6-7:
//
//   t_l = phi_type(l)(h^hp || h^dev || h^struct || h^cm),   T_sum = sum_l t_l
//
// One XGBoost model per layer type (direction is a feature; see docs/learn.md for
// the measurement behind that choice) trained on the target transform chosen in
// TrainOptions::target. Layer types without training rows fall back to the
// roofline estimate max(CT, CM) of layer_features.hpp, flagged in LayerPrediction
// (never a silent zero). Optimizer update nodes use the "optimizer" rows.
//
// This header also holds the evaluation used by `scaledl train layers` and
// `scaledl eval layers`: k-fold or leave-one-device-out cross-validation of the
// XGBoost model against PreNeT's comparison set (linear on CT/CM, random forest,
// MLP). Metrics: RMSE in ms and MRE = mean(|pred - true| / true) in %.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/layer_types.hpp"
#include "scaledl/learn/layer_features.hpp"

namespace scaledl {

namespace xgb {
class Booster;
}

/// Options of LayerPredictor::train; XGBoost names in brackets.
struct TrainOptions {
  int rounds = 100;             ///< boosting rounds, >= 1 (100: docs/learn.md, "Speed")
  int max_depth = 8;            ///< tree depth [max_depth], 1..20
  double eta = 0.1;             ///< learning rate [eta], (0, 1]
  double subsample = 0.8;       ///< row subsample per tree [subsample], (0, 1]
  double colsample = 0.8;       ///< column subsample per tree [colsample_bytree], (0, 1]
  double min_child_weight = 1;  ///< [min_child_weight], >= 0
  /// "log": ln(ms); "raw": ms; "log_roofline": ln(ms / roofline_ms) (a residual over
  /// the roofline, extrapolates to faster devices); "log_roofline_floor":
  /// ln(ms / (roofline_ms + floor_ms)), floor_ms = the fastest training time of the
  /// model's rows (saved in the manifest). Chosen by measurement: docs/learn.md.
  std::string target = "log_roofline_floor";
  bool roofline_features = true;    ///< PreNeT CT/CM columns (FeatureOptions::roofline)
  bool transfer_features = false;   ///< tiling, waves and device-relative columns (FeatureOptions::transfer)
  bool device_features = true;      ///< h^dev columns (FeatureOptions::device)
  bool arch_features = false;       ///< the FP32 lanes per SM (FeatureOptions::arch)
  bool alignment_features = false;  ///< gemm_align and pre_volta (FeatureOptions::alignment)
  /// true: trained with rooflines at the spec peak of probed GPUs (DeviceRecord::compute_gflops
  /// since 2026-11-26, manifest "rates": "spec_peak"); false: a model from before, whose
  /// probed GPUs' rows were normalised by their measured rates
  bool spec_rates = true;
  /// true: rooflines at the spec peak of each row's dtype (FeatureOptions::dtype_rates;
  /// manifest "rates": "dtype_peak"), so the trees learn a BF16 row's share of the
  /// tensor-core peak; false: at the FP32 rate for every dtype
  bool dtype_rates = false;
  /// true: learn kernel times. Each GPU's rows lose that GPU's timing floor first, the
  /// fastest time of any of its rows (what timing one operator alone costs on its host:
  /// 11-14 us on ours, 25-41 us on NeuSight's), kept >= 1/10 of the row's time; CPU rows
  /// are kept as measured. Inside a model the GPU runs its kernels back to back, without
  /// that floor (docs/unseen-gpu.md, "Kernel times"). Manifest "kernel_time"; absent = false.
  bool kernel_time = false;
  /// true: every GPU's memory-bound roofline runs at its sustained bandwidth, not the spec
  /// sheet's: for a GPU with training rows, what its largest elementwise rows move per
  /// second (sustained_bandwidths()); for another, its probe's measured copy bandwidth
  /// (DeviceRecord::measured_bw_gbs), else its spec bandwidth times the median share the
  /// training GPUs of its memory family (HBM, GDDR) sustain. The trees then learn one memory efficiency for
  /// every GPU (docs/unseen-gpu.md, "Sustained bandwidth"). Manifest "sustained_bw"; absent = false.
  bool sustained_bw = false;
  bool split_direction = false;  ///< one model per (type, direction) instead of a direction feature
  /// random-forest mode (PreNeT baseline): 1 round of 100 parallel trees, subsample
  /// 0.632, colsample_bynode 0.6, eta 1; rounds/eta/subsample/colsample are ignored
  bool forest = false;
  int min_rows = 8;      ///< a (type) with fewer rows is not trained: roofline fallback, >= 1
  int nthread = 0;       ///< XGBoost threads, 0 = automatic (1 below 16,384 rows, else all cores)
  uint64_t seed = 0;     ///< XGBoost seed
  bool verbose = false;  ///< print progress to stderr

  nlohmann::json to_json() const;
  static TrainOptions from_json(const nlohmann::json& j, const std::string& ctx = "train_options");
  void validate() const;
};

/// One training row: a layer instance in one direction on one device with its time.
struct LayerSample {
  LayerType type = LayerType::Linear;
  std::vector<int64_t> dims;
  DType dtype = DType::FP32;
  Direction dir = Direction::Forward;
  std::string device;  ///< DeviceRecord::key()
  double ms = 0;       ///< measured time, ms, finite and > 0
  /// "" for an isolated layer row; for a per-node time measured inside a whole
  /// model (in_model_samples.hpp) the run it came from, "<db>: <model_key>"
  /// (the unit that CvOptions::holdout = "model-runs" keeps out of training).
  std::string group;
  /// What timed the row (LayerMeasurement::source: "bench", "neusight", "aiconfigurator", ...):
  /// each harness has its own timing floor on a GPU (kernel_time_samples()).
  std::string harness;
};

/// Store rows -> samples: fwd (or update, for optimizer rows) and bwd timings that
/// are present become one sample each. A missing timing is NaN (NeuSight has fwd
/// only); a row with no timing at all, a negative, zero or infinite timing, dims
/// that fail validate_dims, or a device not in `devices` is an Error naming the
/// row's key and the value.
std::vector<LayerSample> samples_from_measurements(const std::vector<LayerMeasurement>& rows,
                                                   const std::map<std::string, DeviceRecord>& devices);

/// The slowest fastest-row that timing_floors() reads as a floor, ms: launch and timing
/// overhead is 2-20 us on the GPUs with data; a fastest row above this is a kernel.
inline constexpr double kMaxTimingFloorMs = 0.05;
/// The timing floor of each GPU and harness among `samples` (TrainOptions::kernel_time): the
/// fastest time of any of its samples timed by that harness, ms, by (DeviceRecord::key(),
/// LayerSample::harness), where that is at most kMaxTimingFloorMs (else none): NeuSight's
/// eager timings of an A100 carry 25-41 us of host time, AIConfigurator's CUDA-graph
/// replays of an H100 none. Devices of kind "cpu" have none.
std::map<std::pair<std::string, std::string>, double> timing_floors(
    const std::vector<LayerSample>& samples, const std::map<std::string, DeviceRecord>& devices);
/// `samples` as TrainOptions::kernel_time learns them: each GPU sample's time less its
/// device's and harness's timing floor (timing_floors() of `samples`), kept >= 1/10 of the time; CPU
/// samples unchanged. Training and cross-validation (every method, test rows too) use it.
std::vector<LayerSample> kernel_time_samples(const std::vector<LayerSample>& samples,
                                             const std::map<std::string, DeviceRecord>& devices);

/// The sustained memory bandwidth of each GPU among `samples`, GB/s, by DeviceRecord::key():
/// the median of bytes moved / time over its largest forward elementwise rows (add, mul,
/// relu, gelu, silu; of those at 10x its fastest such row or more, so the host's timing
/// floor is under a tenth, or of all when fewer than 5 are: the tenth with the most bytes,
/// at least 5 rows). What `scaledl probe`'s 1 GiB copy measures (3,006 GB/s on our H100,
/// 3,007 from its campaign's rows). GPUs without 5 such rows, CPUs and records without a
/// spec bandwidth have none. Only rows that move at least kMinStreamBytes and 4x the L2
/// count: smaller ones are served by the cache or bound by the launch.
inline constexpr double kMinStreamBytes = 64e6;
std::map<std::string, double> sustained_bandwidths(const std::vector<LayerSample>& samples,
                                                   const std::map<std::string, DeviceRecord>& devices);

/// The devices as probes would know them (CvOptions::probe_bandwidth, eval --probe-bandwidth):
/// each GPU of `samples` with a sustained bandwidth (sustained_bandwidths()) gets it as its
/// measured_bw_gbs in `devices` (a GPU not in `devices` is skipped). Returns how many got one.
size_t set_probe_bandwidths(std::map<std::string, DeviceRecord>& devices,
                            const std::vector<LayerSample>& samples);

/// Layer rows and devices of one or more stores (read-only), plus devices from
/// spec JSON files (either DeviceRecord format). Rows of status "ok" only.
struct TrainingData {
  std::vector<LayerMeasurement> rows;
  std::map<std::string, DeviceRecord> devices;  ///< by DeviceRecord::key()
};
/// The stores' layer rows of status "ok"; with `layer_max_cv` > 0 also the "unstable"
/// ones whose forward (and, where timed, backward) CV is <= layer_max_cv: a noisy
/// machine's rows still carry its speed (docs/results/cpu-zen4/README.md).
TrainingData load_training_data(const std::vector<std::string>& dbs,
                                const std::vector<std::string>& device_specs = {}, double layer_max_cv = 0);

/// A prediction, whether it came from the fallback (no model for the type: the
/// roofline; for `pointwise`, another elementwise type's model by bytes), and whether the type's model saw no
/// training row of this direction and dtype (say bf16 from fp32-only data): carried over by the features, not
/// learnt.
struct LayerPrediction {
  double ms = 0;
  bool fallback = false;
  bool extrapolated = false;
  bool misaligned = false;  ///< costed at a narrow-alignment GEMM's rate (misaligned_gemm_ms)
};

/// How a linear layer's GEMMs are aligned for cuBLAS's tensor-core kernels: a half-precision or
/// TF32 operand whose contiguous dimension (d_in or d_out; the tokens never are one) is no multiple
/// of 16 bytes' worth of elements runs on narrow-alignment kernels (CUTLASS align1 / align2), all
/// three of its GEMMs (the forward's output or input, dgrad's dY or dX, wgrad's dY or X).
enum class GemmAlignment {
  Aligned,  ///< both dimensions multiples of 16 bytes (or no tensor-core dtype, or not a linear)
  Even,     ///< even, but no multiple of 16 bytes: align2 / align4 kernels (BERT's 30,522)
  Odd,      ///< an odd dimension: align1 kernels (GPT-2's vocabulary, 50,257)
};          // from best to worst: linear_alignment takes the larger of its two dimensions'

/// One contiguous dimension `d` in `dtype`: BF16, FP16 and TF32 only (FP8 GEMMs need 16-byte-aligned
/// operands and Transformer Engine pads them; FP32 runs SIMT).
GemmAlignment dim_alignment(int64_t d, DType dtype);
/// `dims` of a Linear node ([tokens, d_in, d_out, bias]): the worse of d_in's and d_out's.
GemmAlignment linear_alignment(const std::vector<int64_t>& dims, DType dtype);
/// The matrix FLOP a narrow-alignment GEMM does per SM and clock: Odd, the median of the 26 TN
/// GEMMs of >= 10^11 FLOP with M = 4,097 (A stored [K, M]) on our H200 (135 TFLOP/s on 132 SMs at
/// 1,980 MHz; datasets/h200/training-kinds/gemm.csv); Even, the LM head of our H100 zoo's BERT runs
/// in BF16 (vocabulary 30,522; forward and backward of 32 x 128 and 32 x 512 tokens at width 1,024,
/// 211 TFLOP/s median; datasets/h100/h100.sqlite node_times). Tests: LayerPredictor.Misaligned*.
constexpr double kOddGemmFlopPerSmClock = 516;
constexpr double kEvenGemmFlopPerSmClock = 807;
/// The time of node `n` (a Linear, forward or backward) on `dev` at the narrow-alignment kernels'
/// rate: its FLOP over the rate per SM and clock times the device's SMs and clock, ms; 0 when `n`
/// is aligned, `dev` is a CPU or another vendor's GPU (the rates are cuBLAS's on Hopper), or its
/// record has no SM count or clock. The layer models never timed a misaligned GEMM (every
/// training row is aligned): a node's time is the larger of theirs and this.
double misaligned_gemm_ms(const LayerNode& n, const DeviceRecord& dev);

/// Not safe for concurrent calls on one object (predict_batch tunes XGBoost's
/// thread count per call); use one LayerPredictor per thread.
class LayerPredictor {
 public:
  LayerPredictor();
  ~LayerPredictor();
  LayerPredictor(LayerPredictor&&) noexcept;
  LayerPredictor& operator=(LayerPredictor&&) noexcept;

  static LayerPredictor train(const std::vector<LayerMeasurement>& rows,
                              const std::map<std::string, DeviceRecord>& devices, const TrainOptions& o);
  static LayerPredictor train_samples(const std::vector<LayerSample>& samples,
                                      const std::map<std::string, DeviceRecord>& devices,
                                      const TrainOptions& o);

  /// Writes DIR/manifest.json (format version, options, target transform, per-model
  /// feature names, row counts, file names) and DIR/<model>.json (XGBoost JSON).
  void save(const std::string& dir) const;
  /// Reads what save wrote; a missing, truncated or corrupt file, a version or
  /// feature-name mismatch => Error naming the file.
  static LayerPredictor load(const std::string& dir);
  /// The files an existing layer-model directory owns (its manifest and the model files it
  /// lists), for StagingDir: `train layers --out` replaces only such a directory.
  static OwnedFiles output_files();

  /// Time of one layer instance, ms (> 0). Validates dims and direction.
  double predict_ms(LayerType t, const std::vector<int64_t>& dims, DType dtype, Direction dir,
                    const DeviceRecord& dev) const;
  LayerPrediction predict(LayerType t, const std::vector<int64_t>& dims, DType dtype, Direction dir,
                          const DeviceRecord& dev) const;
  /// ms per node of `g` (index = node id), in the node's direction, dtype from g.settings.
  std::vector<double> predict_nodes(const LayerGraph& g, const DeviceRecord& dev) const;
  std::vector<LayerPrediction> predict_nodes_detail(const LayerGraph& g, const DeviceRecord& dev) const;
  /// Fast path: `rows` instances of one type/dtype/direction; `dims` is row-major
  /// [rows, layer_info(t).dims.size()]; writes `rows` ms to `out_ms`. Returns true
  /// when the type has no model: the roofline fallback, or for `pointwise` the model of
  /// relu, gelu, silu or mul (the first trained), times the ratio of the bytes moved.
  bool predict_batch(LayerType t, const int64_t* dims, size_t rows, DType dtype, Direction dir,
                     const DeviceRecord& dev, double* out_ms) const;

  /// Prediction goes through TreeForest (tree_forest.hpp: the trees compiled at
  /// train/load time) when it covers the model, else through XGBoost. `false`
  /// forces XGBoost's predictor (for comparisons; same values within float rounding).
  void set_compiled_trees(bool on) { compiled_trees_ = on; }
  bool compiled_trees() const { return compiled_trees_; }
  /// True when every model predicts through compiled trees: then predict*() read
  /// only immutable state and may be called from several threads at once.
  bool concurrent_predict() const;

  /// True when a trained model serves (t, dir) (false => roofline fallback).
  bool has_model(LayerType t, Direction dir) const;
  /// Whether the model serving (t, dir) had training rows of this direction and
  /// dtype; nullopt without a model or when its manifest predates the record.
  std::optional<bool> trained_on(LayerType t, Direction dir, DType dtype) const;
  const TrainOptions& options() const { return opts_; }
  /// The memory bandwidth the rooflines of `dev` run at (GB/s): with TrainOptions::sustained_bw
  /// the GPU's sustained bandwidth (see there), else DeviceRecord::bandwidth_gbs().
  double roofline_bandwidth_gbs(const DeviceRecord& dev) const;
  /// With sustained_bw: the median share of their spec bandwidth the training GPUs
  /// sustain; 0 otherwise. A GPU known by its spec sheet alone gets the median share of
  /// the training GPUs of its memory family (memory_family(): HBM or GDDR) where there
  /// are some, else this one.
  double sustained_bw_share() const { return bw_share_; }
  /// The share a spec sheet of memory family `family` ("hbm", "gddr", "") gets.
  double sustained_bw_share(const std::string& family) const;
  /// Where roofline_bandwidth_gbs(dev) comes from: "layer rows" (a training GPU's own),
  /// "measured" (the record's copy bandwidth), "hbm share" / "gddr share" / "share" (the
  /// spec bandwidth times the training GPUs' share), or "" without sustained_bw or for a CPU.
  std::string roofline_bandwidth_source(const DeviceRecord& dev) const;
  /// {"models": {name: {rows, features}}, "target": ..., ...}
  nlohmann::json summary() const;

 private:
  struct Model;
  const Model* find(LayerType t, Direction dir) const;
  /// roofline_bandwidth_gbs(dev) and roofline_bandwidth_source(dev), decided once
  std::pair<double, std::string> sustained_bw_of(const DeviceRecord& dev) const;
  /// `dev` as the features see it: with sustained_bw, its spec bandwidth replaced by
  /// roofline_bandwidth_gbs(dev)
  DeviceRecord feature_device(const DeviceRecord& dev) const;
  bool predict_batch_as(LayerType t, const int64_t* dims, size_t rows, DType dtype, Direction dir,
                        const DeviceRecord& dev, double* out_ms) const;
  TrainOptions opts_;
  std::map<std::string, double> bw_;                  ///< sustained bandwidth of the training GPUs, GB/s
  double bw_share_ = 0;                               ///< their median share of the spec bandwidth
  std::map<std::string, double> bw_share_by_family_;  ///< the same per memory family
  bool compiled_trees_ = true;
  std::map<std::string, std::unique_ptr<Model>> models_;  ///< by model name ("linear" or "linear.bwd")
};

/// Name of the model serving (t, dir): the type name, plus ".fwd"/".bwd" when split.
std::string model_name(LayerType t, Direction dir, bool split_direction);

// ---- evaluation ----------------------------------------------------------

/// Regressors compared in cross-validation (PreNeT's comparison set).
///   xgboost  LayerPredictor (this file)
///   linear   least squares t = a + b*CT + c*CM per type and direction (Paleo-like:
///            time = FLOP / rate + bytes / bandwidth with fitted coefficients)
///   forest   XGBoost random-forest mode: 1 round of num_parallel_tree=100 trees,
///            subsample 0.632, colsample_bynode 0.6, same features and target
///   mlp      LibTorch MLP per type: 2 hidden layers of 64 ReLU units on
///            standardised log1p features, log-time target, Adam
struct CvOptions {
  int folds = 5;                  ///< k of k-fold, >= 2 (ignored with leave_one_device)
  bool leave_one_device = false;  ///< folds = devices: train on the others, test the held-out one
  std::vector<std::string> methods = {"xgboost", "linear", "forest", "mlp"};
  TrainOptions train;        ///< options of the xgboost (and forest) models
  int mlp_epochs = 60;       ///< MLP passes over the training rows, >= 1
  bool mlp_roofline = true;  ///< MLP features include CT/CM (PreNeT); false = MLP-ACC's plain features
  std::string torch_device = "cpu";  ///< LibTorch device of the MLP ("cpu", "cuda")
  uint64_t seed = 1;                 ///< fold assignment and MLP init
  /// "rows": k-fold over all samples. "model-runs": group k-fold over the model
  /// runs of the in-model samples (LayerSample::group non-empty): fold k tests the
  /// in-model samples of its runs and trains on every isolated sample plus (when
  /// in_model_train) the in-model samples of the other runs, so a run's nodes are
  /// never in both. Ignored with leave_one_device.
  std::string holdout = "rows";
  bool in_model_train = true;  ///< "model-runs": train on the other runs' in-model samples too
  /// leave_one_device: the held-out GPU is known as if probed, its measured_bw_gbs the
  /// sustained bandwidth of its own rows (sustained_bandwidths(); what `scaledl probe`
  /// measures); its other rows stay unseen. Without it, its spec sheet alone.
  bool probe_bandwidth = false;
};

/// The GPU a device key names, for leave-one-device-out folds: the name of a "cuda:" (probed)
/// or "spec:" (spec sheet) key, so both records of one GPU are one fold; other keys as they are.
std::string device_identity(const std::string& key);

/// Error of one method on one layer type and direction (and one held-out
/// device, or "all").
struct CvResult {
  std::string method;
  std::string type;               ///< layer type name, or "all"
  std::string direction = "all";  ///< "fwd", "bwd", "update" (only when the rows have several), or "all"
  std::string dtype = "all";      ///< "fp32", "bf16", ... (only when the rows have several), or "all"
  std::string device;             ///< held-out GPU (device_identity) or device key, or "all"
  size_t n = 0;                   ///< test rows
  double rmse_ms = 0;             ///< sqrt(mean((pred - true)^2)), ms
  double mre_pct = 0;             ///< 100 * mean(|pred - true| / true), %
  double bias_pct = 0;  ///< 100 * mean((pred - true) / true), %: the sign says too high (+) or too low (-)
};

/// One held-out row's prediction (cross_validate's `rows`): which fold held it out
/// ("all" for k-fold), where and what it is, the time measured and the time predicted
/// (kernel times with TrainOptions::kernel_time, as the errors are scored).
struct CvRowPrediction {
  std::string method;
  std::string fold;
  std::string device;
  LayerType type = LayerType::Linear;
  std::vector<int64_t> dims;
  DType dtype = DType::FP32;
  Direction dir = Direction::Forward;
  double measured_ms = 0;
  double predicted_ms = 0;
};

/// CSV of the rows (header method,fold,device,type,dims,dtype,direction,measured_ms,predicted_ms;
/// dims joined by "x"; fold and device quoted where they need it).
std::string cv_rows_csv(const std::vector<CvRowPrediction>& rows);

/// Fixed-width table of results (columns method, type, dir, dtype, device, n, RMSE_ms, MRE_%).
std::string format_cv_table(const std::vector<CvResult>& r);
nlohmann::json cv_to_json(const std::vector<CvResult>& r);

/// Cross-validated errors of every method on the same folds.
/// `rows` (optional) receives every held-out row's prediction.
std::vector<CvResult> cross_validate(const std::vector<LayerSample>& samples,
                                     const std::map<std::string, DeviceRecord>& devices, const CvOptions& o,
                                     std::vector<CvRowPrediction>* rows = nullptr);

/// Fold of each model run (LayerSample::group) under CvOptions::holdout =
/// "model-runs": the sorted distinct groups shuffled with `seed`, run i -> fold
/// i % folds. Error when there are fewer runs than folds.
std::map<std::string, int> model_run_folds(const std::vector<LayerSample>& samples, int folds, uint64_t seed);

/// Predictions of one method trained on `train` for `test` rows (ms), same order.
std::vector<double> fit_predict(const std::string& method, const std::vector<LayerSample>& train,
                                const std::vector<LayerSample>& test,
                                const std::map<std::string, DeviceRecord>& devices, const CvOptions& o);

}  // namespace scaledl
