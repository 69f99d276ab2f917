#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The campaign store: one SQLite file (WAL, transactions) holding devices,
// environments, layer measurements and whole-model measurements.
//
// Rows are keyed by (campaign, config key, device): a measurement is written in
// one transaction after it finishes, and `INSERT ... ON CONFLICT DO NOTHING`
// makes re-running a killed campaign continue where it stopped, with no lost
// and no duplicated rows.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/io/device.hpp"
#include "scaledl/ir/layer_types.hpp"

struct sqlite3;

namespace scaledl {

/// Summary of repeated timings, milliseconds.
struct TimingStats {
  double median_ms = NAN;
  double p10_ms = NAN;
  double p90_ms = NAN;
  double cv = NAN;  ///< coefficient of variation (stddev / mean), dimensionless
  int n = 0;        ///< timed repeats
  /// From raw samples (ms); empty input gives n = 0 and NaNs.
  static TimingStats from_samples(std::vector<double> samples_ms);
};

/// Allocator-exact memory of one benchmark (memory_meter.hpp; issue #15). Kept
/// in the store's `memory` table (schema 3), keyed like the timing row.
struct PeakMemory {
  double peak_bytes = 0;   ///< highest allocated bytes during the measured iteration / layer call
  double base_bytes = 0;   ///< allocated before it began (weights, optimizer state, batch, inputs)
  double saved_bytes = 0;  ///< layers: bytes the forward keeps for backward beyond its output (0 for models)
  std::string method;      ///< "cpu-counting-allocator" | "cuda-caching-allocator"; empty = not measured
  bool measured() const { return !method.empty() && peak_bytes > 0; }
};

/// status values: "ok", "unstable" (spread too wide to trust), "oom", "error".
struct LayerMeasurement {
  std::string campaign;  ///< free-form campaign name
  LayerType type = LayerType::Linear;
  std::vector<int64_t> dims;  ///< layer_info(type).dims
  DType dtype = DType::FP32;
  std::string device;  ///< DeviceRecord::key()
  std::string status = "ok";
  std::string reason;            ///< why not ok
  TimingStats fwd, bwd;          ///< forward / backward time
  PeakMemory memory;             ///< peak of forward + backward (bench layers), when measured
  std::string source = "bench";  ///< "bench" or an importer ("neusight")
  int64_t env_id = 0;            ///< environments row, 0 = unknown
};

/// Per-node time measured inside a real model (for the graph-level gap).
struct NodeTime {
  std::string node;  ///< LayerNode::name
  double ms = NAN;
};

struct ModelMeasurement {
  std::string campaign;
  std::string model_name;
  std::string family;
  nlohmann::json model;     ///< ModelSpec::to_json()
  nlohmann::json settings;  ///< TrainSettings::to_json()
  std::string device;       ///< DeviceRecord::key()
  std::string status = "ok";
  std::string reason;
  TimingStats iter;                  ///< full iteration incl. optimizer step (if settings say so)
  TimingStats iter_noopt;            ///< forward + loss + backward only
  std::vector<NodeTime> node_times;  ///< per-layer times inside the model
  PeakMemory memory;                 ///< peak of one iteration as settings say (bench models), when measured
  std::string source = "bench";
  int64_t env_id = 0;
};

/// Whether a model run's median iteration time is a usable training/test label:
/// status "ok", or "unstable" with the CV of its timed iterations (iter.cv) <=
/// max_cv: flagged for a warm-up that did not settle or a noisy iter_noopt,
/// while the label itself is as tight as an ok row's (0 = "ok" rows only).
bool usable_model_label(const ModelMeasurement& m, double max_cv);

/// Canonical key of a layer config, e.g. "linear:128x768x3072x1:fp32".
std::string layer_key(LayerType t, const std::vector<int64_t>& dims, DType dtype);
/// Canonical key of a model run: model name + settings JSON dump.
std::string model_key(const ModelMeasurement& m);

/// One timed collective (scaledl bench allreduce, or an imported nccl-tests row).
/// `bytes` is nccl-tests' "size" (collective_bench.hpp); time is of one operation.
struct CollectiveMeasurement {
  std::string campaign = "default";
  std::string collective;            ///< allreduce | allgather | reducescatter | sendrecv
  std::string backend;               ///< gloo | nccl | mpi
  std::string device;                ///< device key or "" (imported tables)
  std::string level = "intra-node";  ///< intra-node | inter-node
  std::string dtype = "fp32";
  int64_t world = 2;  ///< ranks
  int64_t nodes = 1;
  double bytes = 0;
  bool in_place = false;
  double time_s = NAN;     ///< median time of one operation, seconds
  double busbw_gbs = NAN;  ///< nccl-tests bus bandwidth, GB/s
  double cv = NAN;
  int repeats = 0;
  std::string status = "ok";  ///< ok | unstable | unsupported | error
  std::string source;         ///< the command or file the row came from
};

/// What Store::merge_from did with one input store.
struct MergeSummary {
  size_t devices_added = 0;                     ///< device keys new to this store
  size_t environments_added = 0;                ///< environment rows new to this store (others reuse its ids)
  size_t layers_added = 0, layers_skipped = 0;  ///< skipped: (campaign, key, device) already here
  size_t models_added = 0, models_skipped = 0;  ///< likewise
  size_t collectives_added = 0, collectives_skipped = 0;  ///< skipped: their natural key already here
  size_t memory_added = 0, memory_skipped = 0;            ///< memory rows (schema 3), likewise
  /// Device keys whose record in the input differs from this store's; this
  /// store's record was kept. Each entry: "KEY (fields that differ: a, b)".
  std::vector<std::string> device_conflicts;
  size_t rows_added() const { return layers_added + models_added + collectives_added; }
  size_t rows_skipped() const { return layers_skipped + models_skipped + collectives_skipped; }
};

class Store {
 public:
  /// Opens (creating if needed) the SQLite file; applies the schema; WAL mode.
  /// Throws Error("<path>: ...") if it is not a ScaleDL store or is corrupt.
  explicit Store(const std::string& path, bool read_only = false);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }

  /// Inserts or replaces the device row (by key()).
  void put_device(const DeviceRecord& d);
  std::optional<DeviceRecord> device(const std::string& key) const;
  std::vector<DeviceRecord> devices() const;

  /// Stores an environment description (versions, threads, commit); returns its id.
  int64_t put_environment(const nlohmann::json& env);

  /// Inserts one measurement unless its (campaign, key, device) exists; true if inserted.
  bool put_layer(const LayerMeasurement& m);
  /// Many rows in one transaction (importers); returns the number inserted.
  size_t put_layers(const std::vector<LayerMeasurement>& ms);
  /// Keys already present for (campaign, device): what a resumed run skips.
  std::set<std::string> layer_keys(const std::string& campaign, const std::string& device) const;
  /// One pass of a several-pass campaign (`bench layers --passes N`, pass >= 1): kept
  /// apart from the layers table, which gets one row per config from all its passes.
  /// True if inserted (not already there).
  bool put_layer_pass(const LayerMeasurement& m, int pass);
  /// The pass rows of (campaign, device), by config key and pass (no memory, source).
  std::map<std::string, std::map<int, LayerMeasurement>> layer_passes(const std::string& campaign,
                                                                      const std::string& device) const;
  /// Layer rows; empty filters match all. ok_only keeps status "ok".
  std::vector<LayerMeasurement> layers(std::optional<LayerType> type = std::nullopt,
                                       const std::string& device = "", bool ok_only = true) const;

  bool put_model(const ModelMeasurement& m);
  std::set<std::string> model_keys(const std::string& campaign, const std::string& device) const;
  std::vector<ModelMeasurement> models(const std::string& device = "", bool ok_only = true) const;

  /// Collective rows, validated; duplicates of (campaign, collective, backend,
  /// device, level, dtype, world, nodes, bytes, in_place) are skipped. One
  /// transaction: a bad row inserts nothing. Returns the rows inserted.
  size_t put_collectives(const std::vector<CollectiveMeasurement>& rows);
  /// Rows (empty filters match all), ordered by group then size; empty for a
  /// store written before the table existed.
  std::vector<CollectiveMeasurement> collectives(const std::string& campaign = "",
                                                 const std::string& collective = "",
                                                 bool ok_only = true) const;
  bool has_collectives_table() const;
  /// Whether the file has this table (older stores opened read-only lack the newer ones).
  bool has_table(const std::string& name) const;

  /// Copies `other`'s devices, environments, layer, model and collective rows
  /// into this store, column for column (created_at too), in one transaction:
  /// all or nothing. Rows whose key is already here are skipped, so merging
  /// twice adds nothing; env_id is remapped to this store's id of the same
  /// environment. A device key present in both keeps this store's record
  /// (listed in device_conflicts when the records differ). Every row of `other`
  /// is read through the checked readers first: a bad row throws before
  /// anything is written. `other` must be a different file.
  MergeSummary merge_from(const Store& other);

  /// Row counts: {"devices":..,"layers":..,"models":..} (+ "collectives" when it has rows)
  nlohmann::json counts() const;
  /// Summary for `scaledl db info`: {"schema_version", "counts", "devices": [keys],
  /// "layer_groups": [{campaign, device, status, rows, fwd_cv_median, fwd_cv_max,
  /// bwd_cv_median, bwd_cv_max}], "model_groups": [{campaign, device, status, rows}]}.
  nlohmann::json info() const;
  /// Whole store as JSON, or one table ("layers" | "models" | "devices") as CSV.
  nlohmann::json export_json() const;
  void export_csv(const std::string& table, std::ostream& out) const;

  sqlite3* handle() { return db_; }

  /// Writes that belong together (an import, a campaign's device record and its
  /// first rows): all of them or none. The outermost one is BEGIN IMMEDIATE ..
  /// COMMIT, nested ones are savepoints; without commit() the destructor rolls back.
  class Transaction {
   public:
    explicit Transaction(Store& s);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

   private:
    Store& s_;
    std::string savepoint_;  ///< "" = the outermost transaction
    bool done_ = false;
  };

 private:
  void exec(const std::string& sql);
  /// memory rows of one kind ("model" | "layer") by (campaign, config_key, device).
  std::map<std::tuple<std::string, std::string, std::string>, PeakMemory> memory_rows(
      const std::string& kind) const;
  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace scaledl
