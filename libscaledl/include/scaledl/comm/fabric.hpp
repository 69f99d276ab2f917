#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Fabric presets (issues #41-#43, docs/comm.md "Fabric presets"): the collective
// models of a GPU system's interconnect, shipped under models/fabrics/ so that
// `predict --gpus` and `scale` price collectives without a calibration file.
//
// A preset is either
//   measured  fitted by `scaledl comm presets` on public NCCL measurements of that
//             system (datasets/gpus/: AIConfigurator, Vidur), one ring fit
//             T = a(N) S/B + c(N) gamma (comm.hpp) per collective and world size N
//             on the rows of at least `min_bytes`;
//   derived   a system nobody here has rows of: B = its spec link bandwidth x the
//             median share of the link (B / link_gbs) that the measured presets of
//             the same kind reach at that collective and world size, gamma their
//             median gamma.
// Across nodes, a preset's `inter` model is the measured inter-node all-reduce
// where a campaign has one, else the per-GPU NIC bandwidth x the share the measured
// inter-node fits reach.
// No LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/comm/comm.hpp"
#include "scaledl/io/store.hpp"

namespace scaledl {

/// What joins the GPUs of one node (one place: a new kind is added here, and the
/// switch in fabric.cpp names every spot that must handle it).
enum class FabricKind {
  NVSwitch,    ///< every GPU on NVLink switches (HGX/DGX boards, GB200's NVL72 domain)
  NVLinkPair,  ///< NVLink bridges between pairs of PCIe cards, PCIe beyond the pair
  PCIe,        ///< PCIe (through switches or the host), no NVLink
};
constexpr int kFabricKindCount = 3;
const char* to_string(FabricKind k);
/// "nvswitch" | "nvlink-pair" | "pcie"; anything else is an Error naming `key` and the value.
FabricKind fabric_kind_of(const std::string& s, const std::string& key);

/// The collective models of a cluster as predict_parallel uses them: inside a node
/// by the ranks of the group, and across nodes.
struct ClusterComm {
  CommModel intra;  ///< inside a node, for any group size `by_ranks` does not cover
  CommModel inter;  ///< across nodes
  /// All-reduce models inside a node by ranks, ascending; empty = `intra` for all.
  std::vector<std::pair<int64_t, CommModel>> by_ranks;
  /// The model of a group of `ranks` inside a node: the fit of the largest ranks
  /// <= `ranks`, else of the smallest; `intra` when by_ranks is empty.
  const CommModel& inside(int64_t ranks) const;
  /// One model for every group (a calibration file, a bundle's own).
  static ClusterComm uniform(const CommModel& m) { return {m, m, {}}; }
};

/// One fit of a preset: a collective at one world size inside a node.
struct FabricFit {
  std::string collective;  ///< allreduce | allgather | reducescatter | sendrecv
  int64_t world = 2;
  CommModel model;  ///< ring form (comm_factors): bus bandwidth B, gamma
  double mre = 0;   ///< mean |relative residual| on the rows fitted (0 for derived)
  size_t samples = 0;
  double min_bytes = 0, max_bytes = 0;  ///< message sizes fitted (0, 0 for derived)
};

/// What a fabric definition and its preset both say of the system.
struct FabricSystem {
  std::string name;         ///< file stem, e.g. "hgx-h100"
  std::string description;  ///< one line: the system and its links
  FabricKind kind = FabricKind::NVSwitch;
  int64_t gpus_per_node = 8;  ///< GPUs of one NVLink / PCIe domain, >= 1
  double link_gbs = 0;        ///< spec bandwidth per GPU and direction of the node's links, GB/s, > 0
  double nic_gbs = 0;         ///< per-GPU network bandwidth per direction across nodes, GB/s; 0 = unknown
  std::string device;         ///< the GPU's store key ("spec:NVIDIA H100 80GB HBM3"); "" = not tied
  /// Spec keys of the GPUs that use this preset by default (predict --gpus, scale without
  /// --fabric or --comm): a record matches by its name, whatever its kind (spec or probed).
  std::vector<std::string> devices;
  std::vector<std::string> campaigns;  ///< the store campaigns fitted; empty = derived

  /// Reads every key above but `name` (each caller checks its own); throws naming ctx and the key.
  void read_json(const nlohmann::json& j, const std::string& ctx);
};

struct FabricPreset : FabricSystem {
  std::string origin;              ///< "measured" or "derived"
  std::string source;              ///< where the rows or the derivation come from
  std::vector<FabricFit> fits;     ///< intra-node, ordered by collective then world
  std::optional<CommModel> inter;  ///< all-reduce across nodes (per-GPU NIC)
  std::string inter_source;        ///< how `inter` was obtained ("" when absent)

  /// The fit of `collective` at the largest world <= `ranks` (else the smallest
  /// world); nullptr when the preset has no fit of that collective.
  const FabricFit* fit(const std::string& collective, int64_t ranks) const;
  /// The all-reduce models by ranks inside a node, and `inter` (or, lacking one,
  /// the all-reduce at gpus_per_node: the cross-node warning then applies).
  ClusterComm cluster() const;
  /// {name, description, kind, gpus_per_node, link_gbs, nic_gbs, origin, device,
  ///  campaigns, source, fits: [...], inter, inter_source} plus top-level
  /// bandwidth_Bps / gamma_s / nodes: the all-reduce at gpus_per_node, so that
  /// `--comm FILE` reads a preset as a calibration too.
  nlohmann::json to_json() const;
  /// Throws naming ctx and the key on a missing or bad field.
  static FabricPreset from_json(const nlohmann::json& j, const std::string& ctx);
};

/// Reads a preset file; throws naming the file and the key.
FabricPreset load_fabric(const std::string& path);

/// A preset named NAME or given as a FILE: `name_or_file` when it is a file; else
/// NAME.json in each of `dirs` (in order). An Error naming `key` and the value,
/// and the presets the first existing dir holds, when none is found.
FabricPreset find_fabric(const std::string& name_or_file, const std::vector<std::string>& dirs,
                         const std::string& key = "--fabric");

/// The directories presets are looked up in: a spec sheet's ../fabrics (models/devices ->
/// models/fabrics) when `spec_path` is given, then ./models/fabrics.
std::vector<std::string> fabric_dirs_for_spec(const std::string& spec_path);

/// The preset whose `devices` name a GPU called `device_name` (the first in file-name order
/// of the first dir that has one); nullopt when none does.
std::optional<FabricPreset> default_fabric_for(const std::string& device_name,
                                               const std::vector<std::string>& dirs);

/// What `scaledl comm presets` builds: one entry of the definitions file
/// (datasets/gpus/fabrics.json).
struct FabricDefinition : FabricSystem {
  std::string link_source;  ///< where link_gbs / nic_gbs come from
};
/// {"min_bytes": .., "fabrics": [{name, description, kind, gpus_per_node, link_gbs,
/// nic_gbs?, device?, campaigns?, link_source}]}; throws naming the file, entry and key.
struct FabricDefinitions {
  double min_bytes = 1e6;  ///< rows below this size are not fitted
  std::vector<FabricDefinition> fabrics;
};
FabricDefinitions load_fabric_definitions(const std::string& path);

/// Fits every measured definition on `rows` (intra-node rows of its campaigns of at
/// least min_bytes; inter-node all-reduce rows, when its campaigns have some, give
/// `inter`), then derives the others, and the missing inter models, from the
/// measured presets of the same kind (the same definitions order). Errors
/// name the definition: a campaign without rows, a derived kind with no measured
/// preset to learn from.
std::vector<FabricPreset> build_fabric_presets(const FabricDefinitions& defs,
                                               const std::vector<CollectiveMeasurement>& rows);

/// Bus bandwidth (GB/s) that `m` gives `collective` of `bytes` over `world` ranks:
/// a(N) S / T (what nccl-tests prints as busbw).
double model_busbw_gbs(const CommModel& m, const std::string& collective, int64_t world, double bytes);

/// One held-out measurement of leave_one_fabric_out.
struct FabricLooRow {
  std::string fabric, kind, collective;
  int64_t world = 0;
  double bytes = 0;
  double measured_gbs = 0;   ///< the row's bus bandwidth
  double fitted_gbs = 0;     ///< the preset's own fit (in-sample)
  double predicted_gbs = 0;  ///< derived without any row of that GPU
};
/// For each measured preset: derive it from the other GPUs' presets of its kind and
/// predict the bus bandwidth of each of its intra-node rows of at least
/// `min_eval_bytes` (protocol "leave-one-GPU-out (collectives)", docs/results/gpus/).
std::vector<FabricLooRow> leave_one_fabric_out(const FabricDefinitions& defs,
                                               const std::vector<CollectiveMeasurement>& rows,
                                               double min_eval_bytes = 64e6);

/// Mean absolute percentage errors of a group of FabricLooRow.
struct FabricLooSummary {
  std::string group;  ///< "all", a kind, a fabric, or "fabric collective"
  size_t rows = 0;
  double fitted_mape = 0;     ///< %, the presets' own fits
  double predicted_mape = 0;  ///< %, derived without the GPU's rows
};
/// Per kind, then per fabric, then per fabric and collective; "all" first.
std::vector<FabricLooSummary> summarize_fabric_loo(const std::vector<FabricLooRow>& rows);

}  // namespace scaledl
