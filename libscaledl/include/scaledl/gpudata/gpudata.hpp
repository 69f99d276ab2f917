#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Importers of public GPU operator timings into the campaign store, as layer rows of
// ScaleDL's layer types (and collective rows), each keyed to a device record built
// from a spec sheet of models/devices/. One importer per source, each in its own file
// (src/gpudata/<source>.cpp); what they share is here:
//   - SpecCatalog: the spec sheets, found by the name a source gives a GPU (the record's
//     name, or one of its extra.aliases: "NVIDIA V100" in DeepBench is "Tesla V100-SXM2-32GB");
//   - Provenance: where a table came from and what was timed, stored as the rows'
//     environment (environments table; `scaledl db info` lists it);
//   - implausible_layer_row: the check that refuses bad rows (non-positive or non-finite
//     times, rates above the spec peak by more than a tolerance);
//   - GpuImport: collects a source's rows and writes them in ONE transaction (all or
//     nothing), with a summary that counts refused rows per reason and skipped rows
//     (good data without a layer type of ours) per operator.
// The sources, their licenses and what each importer maps: docs/gpu-data.md.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/io/device.hpp"
#include "scaledl/io/store.hpp"

namespace scaledl {

/// Where a table came from, stored with every row imported from it.
struct Provenance {
  std::string
      source;  ///< importer: "aiconfigurator" | "kernelbench" | "vidur" | "deepbench" | "training-kinds"
  std::string repository;  ///< "ai-dynamo/aiconfigurator"
  std::string commit;      ///< commit of the source data
  std::string license;     ///< "Apache-2.0", "MIT"
  std::string framework;   ///< framework and version that ran the kernels ("TensorRT-LLM 1.3.0rc20")
  std::string timed;       ///< what was timed ("GEMM y = x W^T, forward, CUDA-graph replay, mean of 6")
  /// {"provenance": {...all fields...}}: the environment JSON of the rows.
  nlohmann::json to_json() const;
};

/// The spec sheets of a folder (models/devices), found by the name a source gives a GPU.
class SpecCatalog {
 public:
  /// Reads every *.json of `dir` (load_device_spec); a file it cannot read is an Error
  /// naming the file. `extra.aliases`, when present, must be an array of strings.
  explicit SpecCatalog(const std::string& dir);
  /// The record whose name or one of whose aliases equals `name` after trimming and
  /// ignoring case; nullptr when none.
  const DeviceRecord* find(const std::string& name) const;
  const std::vector<DeviceRecord>& records() const { return records_; }

 private:
  std::vector<DeviceRecord> records_;
  std::map<std::string, size_t> by_name_;  ///< normalised name or alias -> index
};

/// Why a layer row is implausible on `dev` ("" = plausible). Refused: a forward (and,
/// where given, backward) median that is not finite or <= 0; a time below the FLOP of
/// its direction at the spec peak of its dtype by more than `tolerance` (share: 0.10 =
/// 10 % faster than the peak); a time below the row's bytes (traffic_bytes) at the spec
/// bandwidth by more than `tolerance`, checked only when those bytes exceed twice the
/// L2 (a smaller working set may be served by the cache).
std::string implausible_layer_row(const LayerMeasurement& m, const DeviceRecord& dev, double tolerance);

struct GpuImportOptions {
  std::string root;                            ///< the source folder (shared data or datasets/gpus/<source>)
  std::string devices_dir = "models/devices";  ///< spec sheets
  std::string campaign;                        ///< campaign of the rows; "" = the source name
  double tolerance = 0.10;                     ///< implausible_layer_row's tolerance
};

/// What an import did.
struct GpuImportSummary {
  std::string source;
  size_t files = 0;                          ///< tables read
  size_t rows = 0;                           ///< data rows read
  size_t layer_rows = 0;                     ///< layer rows accepted
  size_t layers_inserted = 0;                ///< of them new to the store
  size_t collective_rows = 0;                ///< collective rows accepted
  size_t collectives_inserted = 0;           ///< of them new to the store
  std::map<std::string, size_t> refused;     ///< reason -> rows refused (bad data; nothing stored)
  std::map<std::string, size_t> skipped;     ///< operator or reason -> good rows without a layer type of ours
  std::map<std::string, size_t> per_device;  ///< device key -> layer and collective rows accepted
  std::map<std::string, size_t> per_kind;    ///< "linear fwd bf16" -> layer rows accepted
  double seconds = 0;
  size_t refused_total() const;
  nlohmann::json to_json() const;
  /// The lines `scaledl import <source>` prints.
  std::string to_text() const;
};

/// Collects one import's rows and writes them in one transaction. Each table's rows are
/// added with the provenance of that table; a row of a GPU without a spec sheet is refused
/// ("no spec sheet for <name>"), as is an implausible one.
class GpuImport {
 public:
  GpuImport(std::string source, const GpuImportOptions& opt);
  const SpecCatalog& catalog() const { return catalog_; }
  GpuImportSummary& summary() { return sum_; }
  const GpuImportOptions& options() const { return opt_; }

  /// The spec record of a GPU as the data names it, or nullptr (the caller then refuses its
  /// rows with no_spec_sheet(name)).
  const DeviceRecord* device(const std::string& name_in_data) const { return catalog_.find(name_in_data); }
  /// device(), refusing the row when there is none: "no GPU name" for an empty name, else
  /// no_spec_sheet(name).
  const DeviceRecord* device_or_refuse(const std::string& name_in_data);
  /// Adds a layer row of `dev` measured under `prov` (m.device, m.source and m.campaign are set
  /// here; m.campaign when empty). Checks it; returns false (and counts the reason) when refused.
  bool add_layer(LayerMeasurement m, const DeviceRecord& dev, const Provenance& prov);
  /// Adds a collective row of `dev` (c.device, c.source set here). Refused when its time or
  /// size is not positive and finite.
  bool add_collective(CollectiveMeasurement c, const DeviceRecord& dev, const Provenance& prov);
  void refuse(const std::string& reason) { ++sum_.refused[reason]; }
  /// The reason a row of a GPU without a spec sheet is refused: "no spec sheet for <name>".
  static std::string no_spec_sheet(const std::string& name) { return "no spec sheet for " + name; }
  void skip(const std::string& what) { ++sum_.skipped[what]; }

  /// Writes devices, environments, layer rows and collective rows in one transaction.
  /// Returns the summary (with the inserted counts and the time since construction).
  GpuImportSummary write(Store& store);

 private:
  std::string source_;
  GpuImportOptions opt_;
  SpecCatalog catalog_;
  GpuImportSummary sum_;
  /// Records `dev` and `prov` for write() and counts a row of `dev`; returns the provenance key.
  std::string keep(const DeviceRecord& dev, const Provenance& prov);
  std::map<std::string, DeviceRecord> devices_;                   ///< key -> record
  std::map<std::string, Provenance> provs_;                       ///< environment JSON dump -> provenance
  std::vector<std::pair<std::string, LayerMeasurement>> layers_;  ///< (prov key, row)
  /// Collective rows (the store keeps no environment of a collective row: their provenance is
  /// stored as an environment of its own, and the row's `source` names the importer).
  std::vector<CollectiveMeasurement> collectives_;
  double t0_ = 0;
};

// The importers (one per source; docs/gpu-data.md says what each maps and refuses).
// Each reads `opt.root` as the source's folder of ../shared/data or its compact copy
// under datasets/gpus/<source> (same layout and columns, fewer rows), imports in one
// transaction and throws Error naming file:line for a malformed file (missing column,
// bad number); bad rows of a well-formed file are refused and counted instead.
GpuImportSummary import_aiconfigurator(const GpuImportOptions& opt, Store& store);
GpuImportSummary import_kernelbench(const GpuImportOptions& opt, Store& store);
GpuImportSummary import_vidur(const GpuImportOptions& opt, Store& store);
GpuImportSummary import_deepbench(const GpuImportOptions& opt, Store& store);
/// Our own measurements of training's kernels on a lent GPU (scripts/gpu/gpu_training_kinds.py's
/// kernels.csv, attention.csv and gemm.csv, e.g. datasets/h200/training-kinds): the folder
/// holds them directly.
GpuImportSummary import_training_kinds(const GpuImportOptions& opt, Store& store);

}  // namespace scaledl
