#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Importer of the public NeuSight GPU measurements (Lee et al., "Forecasting GPU
// Performance for Deep Learning Training and Inference", ASPLOS 2025, MIT
// license) into the campaign store, as forward timings of ScaleDL layer types.
//
// Layout read (README of the artifact): <root>/ops/<op>/<GPU>.csv,
// <root>/ops-transformer-shapes/{bmm,linear,vec}.csv, <root>/device_configs/*.json.
// Columns are found by header name, so the compact subset under datasets/neusight
// (fewer columns) reads the same way. Shape mapping (honest, no guessing):
//   linear  B,M,N,K  -> linear tokens=B*M (B is 1), d_in=N, d_out=K, bias=1
//   bmm     B,M,N,K  -> bmm batch=B, m=M, n=N, k=K  ([B,M,N] x [B,N,K])
//   ln      B,H      -> layernorm tokens=B, hidden=H
//   softmax B,H      -> softmax rows=B, cols=H
//   add, mul B,H     -> add / mul elements=B*H   (two tensors)
//   relu, gelu B,H   -> relu / gelu elements=B*H
//   addu, mulu, divu B,H -> pointwise elements=B*H, saves=0 (tensor op scalar)
//   powu, tanh B,H   -> pointwise elements=B*H, saves=1 (the backward reads a saved tensor)
//   div and pow (two tensors) have no layer type of ours: skipped and counted per op.
// Rows get source "neusight", dtype fp32 (TF32 off in the artifact), fwd median =
// the published latency (mean of the fastest 5 of 25 runs, n = 5), bwd NaN.
// A malformed row (bad quoting, missing column, non-numeric or non-positive
// latency or shape, unknown GPU) is an Error naming file:line and the value.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/io/store.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

struct NeusightImportOptions {
  std::string root;                   ///< artifact directory (holds ops/, device_configs/)
  std::string campaign = "neusight";  ///< campaign name of the inserted rows
  bool transformer_shapes = true;     ///< also read ops-transformer-shapes/*.csv
  bool traces = false;                ///< also read the per-node traces beside the labels (below)
};

// Per-node traces. Beside each single-GPU eager label, labels/<GPU>/<label>.csv
// times every torch.fx node of the label's model (one transformer block) on
// that GPU in isolation: fw_latency, bw_latency (training labels) and
// AccumulateGrad, ms. They are layer timings at exactly the shapes of the
// labelled models, so `import neusight --traces` stores them as layer rows of campaign
// "<campaign>-traces" (source "neusight-trace"): forward -> fwd, bw_latency ->
// bwd (AccumulateGrad is not a layer of ours). Kernel -> layer type:
//   Linear module, addmm (HF GPT-2's Conv1D)     -> linear tokens, d_in, d_out, bias=1
//   matmul / bmm of two 3-D or 4-D tensors        -> bmm batch, m, n, k
//   LayerNorm module -> layernorm; softmax -> softmax rows, cols; gelu -> gelu; relu -> relu
//   add / mul of two tensors of one shape         -> add / mul elements
//   add, mul, sub, truediv, where with a scalar or a broadcast operand -> pointwise saves=0
//   pow, tanh                                      -> pointwise saves=1
//   Dropout (training labels only; the identity in eval mode) -> dropout elements
// Everything else (views, embeddings, dropout, masks' bookkeeping) is counted
// per kernel and skipped, and so is a node faster than kTraceMinMs: such times
// are the tracer's launch overhead, not the kernel. Nodes of one shape in one
// trace (Q, K and V; repeated blocks) become one row: TimingStats::from_samples
// of their times (the median, and p10 / p90 / CV of the nodes).

/// Nodes below this time (ms) are skipped: launch-bound (see above).
constexpr double kTraceMinMs = 0.05;

/// The kernel a trace node runs: the innermost module class for call_module
/// (from `meta`'s nn_module_stack), the function or method name for
/// call_function ("<built-in method matmul of ...>" -> "matmul") and call_method.
std::string neusight_trace_kernel(const std::string& op, const std::string& target, const std::string& meta);

struct NeusightTraceSummary {
  size_t files = 0;                       ///< trace CSVs read
  size_t nodes = 0;                       ///< nodes with a positive time
  size_t mapped = 0;                      ///< nodes mapped to a layer type
  size_t below_floor = 0;                 ///< mapped nodes faster than kTraceMinMs (skipped)
  size_t rows = 0;                        ///< layer rows after merging nodes of one shape
  size_t inserted = 0;                    ///< new store rows
  std::map<std::string, size_t> skipped;  ///< unmapped nodes per kernel
  nlohmann::json to_json() const;
};

/// Layer rows of one trace file (either the artifact's columns or the compact
/// ones of write_neusight_subset). Malformed => Error naming file:line.
std::vector<LayerMeasurement> read_neusight_trace(const std::string& path, const std::string& campaign,
                                                  const std::string& device_key,
                                                  NeusightTraceSummary& summary);

/// What an end-to-end label's file name says: <model>-<inf|train>-<seq>-<batch>[-suffix].
struct NeusightLabel {
  std::string model;  ///< model_configs/<model>.json
  RunMode mode =
      RunMode::Inference;  ///< inf -> inference; train -> fwd-bwd (no optimizer step in the artifact)
  int64_t seq = 0, batch = 0;
  std::string suffix;  ///< "fusion", "dp4", "tp4", "pp4_1", ... ("" = single-GPU eager)
};
std::optional<NeusightLabel> parse_neusight_label_name(const std::string& stem);

/// The folders of `root`/labels, sorted, each with its device name (the folder
/// name with '_' for ' ': Tesla_T4 = "Tesla T4"). Empty without labels/.
std::vector<std::pair<std::string, std::string>> neusight_label_folders(const std::string& root);

struct NeusightLabelSummary {
  size_t files = 0;                          ///< label JSON files seen
  size_t inserted = 0;                       ///< new model runs
  std::map<std::string, size_t> skipped;     ///< reason -> files not imported
  std::map<std::string, size_t> per_device;  ///< inserted runs per device name
  nlohmann::json to_json() const;
};

/// Imports `root`/labels/<GPU>/*.json (single-GPU eager labels: e2e_latency =
/// T_iter, mode from the name; configs from `root`/model_configs) as model runs
/// of `campaign`, source "neusight". torch.compile (-fusion) and multi-GPU
/// (-dpN/-tpN/-ppN_M) labels and models the IR cannot parse are counted in
/// `skipped`. `device_keys` maps device names to store keys. A malformed file is
/// an Error naming it. No labels/ folder: nothing imported.
NeusightLabelSummary import_neusight_labels(const std::string& root, const std::string& campaign,
                                            Store& store,
                                            const std::map<std::string, std::string>& device_keys);

struct NeusightImportSummary {
  size_t files = 0;                        ///< CSV files read
  size_t rows = 0;                         ///< data rows read
  size_t mapped = 0;                       ///< rows mapped to a layer type
  size_t inserted = 0;                     ///< new store rows (mapped - inserted = duplicates)
  size_t devices = 0;                      ///< device rows written
  std::map<std::string, size_t> per_type;  ///< mapped rows per layer type
  std::map<std::string, size_t> skipped;   ///< unmapped rows per NeuSight op
  NeusightLabelSummary labels;             ///< end-to-end labels (campaign "<campaign>-labels")
  NeusightTraceSummary traces;             ///< per-node traces (campaign "<campaign>-traces")
  double seconds = 0;                      ///< wall time of the import
  nlohmann::json to_json() const;
};

/// Splits CSV text into records of fields (RFC 4180: quoted fields, "" escapes,
/// CRLF or LF; a leading UTF-8 BOM is skipped). `first_line[i]` is the 1-based line on which record i starts.
/// Unterminated quotes => Error naming `ctx` and the line.
std::vector<std::vector<std::string>> parse_csv(const std::string& text, const std::string& ctx,
                                                std::vector<size_t>* first_line = nullptr);
/// Index of the column `name` in a CSV header (parse_csv's first record); -1 when absent.
int csv_column(const std::vector<std::string>& header, const std::string& name);

/// The layer measurements of one NeuSight CSV file (dtype fp32, campaign from `o`);
/// unmapped ops are counted into `summary.skipped`. `device_names` maps the CSV
/// "Device" value to a store device key; an unknown one is an Error (file:line).
std::vector<LayerMeasurement> read_neusight_csv(const std::string& path, const std::string& campaign,
                                                const std::map<std::string, std::string>& device_names,
                                                NeusightImportSummary& summary);

/// Imports devices and all CSV files under `o.root` into `store` (idempotent).
NeusightImportSummary import_neusight(const NeusightImportOptions& o, Store& store);

/// Writes a compact stratified subset of the artifact to `out_dir`: for each CSV
/// file and each op in it, `rows_per_group` rows at evenly spaced latency
/// quantiles, keeping only OPName, Latency, Device and the shape columns; copies
/// device_configs/*.json and LICENSE, the labels and their model configs, and
/// each label's trace with the columns Name, op, kernel, input_shapes,
/// output_shape, fw_latency, bw_latency (nodes with a positive time only).
/// Returns the number of operator data rows written.
size_t write_neusight_subset(const std::string& root, const std::string& out_dir, size_t rows_per_group);

}  // namespace scaledl
