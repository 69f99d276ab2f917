#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Design spaces for `scaledl plan`: parameters, constraints, the candidate set
// (constrained Cartesian product) and the feature encoding a_i of ScaleDL eq. 4.
//
// A space file (see models/spaces/README.md for the full format):
//   {"kind": "layers" | "models",
//    "terms": "linear" | "interactions" | "quadratic",          (default "linear")
//    "max_candidates": 100000,      (product larger than this => random sample of it)
//    "fixed": {"bias": 1, "settings.optimizer": "adamw"},        (copied into every config)
//    "parameters": [
//      {"name": "tokens", "kind": "integer", "min": 128, "max": 8192, "count": 7, "log": true},
//      {"name": "d_in",   "kind": "integer", "min": 256, "max": 4096, "step": 256},
//      {"name": "p",      "kind": "real",    "min": 0.0, "max": 0.5, "count": 3},
//      {"name": "hidden", "kind": "grid",    "values": [64, 128, 256, 512]},
//      {"name": "type",   "kind": "categorical", "values": ["linear", "bmm"]},
//      {"name": "model",  "kind": "categorical",
//       "values": [{"label": "bert", "value": "../bert-base.json"}, ...]},
//      {"name": "settings.seq_len", "kind": "grid", "values": [64, 128],
//       "when": {"model": ["bert", "gpt2"]}}                      (active only for those labels)
//    ],
//    "derived": [{"name": "ffn_dim", "expr": "4 * hidden"}],     (output only, not features)
//    "constraints": [
//      {"expr": "hidden % heads == 0"},
//      {"max_memory_gb": 16} | {"device": "../devices/a100.json", "fraction": 0.9}
//    ]}
//
// layers: every config is {"type", "dims", "dtype"}; parameter (or fixed or
// derived) names are dim names of layer_info(type).dims, "type" and "dtype". A
// parameter named like a dim is active only for types having that dim.
// models: every config is {"model", "overrides", "settings"}; the names
// num_layers, hidden, heads, kv_heads, ffn_dim are written to every alias the
// base config uses (num_hidden_layers/n_layer/num_layers/num_decoder_layers, ...);
// "overrides.<key>" and "settings.<key>" are written as given.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/design/design.hpp"

namespace scaledl {

enum class ParamKind : int { Integer = 0, Real, Grid, Categorical };
enum class Terms : int { Linear = 0, Interactions, Quadratic };

const char* to_string(Terms t);
/// "linear" | "interactions" | "quadratic"; throws naming `key` otherwise.
Terms parse_terms(const std::string& s, const std::string& key = "terms");

struct SpaceParameter {
  std::string name;
  ParamKind kind = ParamKind::Grid;
  std::vector<nlohmann::json> values;  ///< levels as written to configs (numbers or any JSON)
  std::vector<std::string> labels;     ///< categorical: label of each level (used by "when" and exprs)
  bool log = false;       ///< numeric: encode log(x) (sizes); default for integers spanning >= 4x
  double lo = 0, hi = 0;  ///< numeric: encoding range (log already applied when log)
  /// Active only when every listed categorical parameter has one of these labels.
  std::vector<std::pair<std::string, std::vector<std::string>>> when;
  bool numeric() const { return kind != ParamKind::Categorical; }
  /// Encoded value of level value `x` in [-1, 1] (0 when the range is one point).
  double encode(double x) const;
};

struct SpaceConstraint {
  std::string expr;             ///< boolean expression over parameter names; empty for memory
  double max_memory_bytes = 0;  ///< > 0: estimated training memory must not exceed this
  std::string text;             ///< as written, for messages
};

struct DesignSpace {
  std::string kind;  ///< "layers" | "models"
  std::string path;  ///< file it was read from ("" when inline)
  std::string dir;   ///< directory that relative model paths resolve against
  Terms terms = Terms::Linear;
  int64_t max_candidates = 100000;  ///< candidate-set cap, >= 1
  nlohmann::json fixed = nlohmann::json::object();
  std::vector<SpaceParameter> params;
  std::vector<std::pair<std::string, std::string>> derived;  ///< (name, expr)
  std::vector<SpaceConstraint> constraints;
};

/// Parses and validates a space; `ctx` prefixes messages (usually the file path).
DesignSpace parse_space(const nlohmann::json& j, const std::string& ctx = "space",
                        const std::string& dir = ".");
DesignSpace load_space(const std::string& path);

/// One candidate: level index per parameter, -1 where the parameter is inactive.
using Candidate = std::vector<int32_t>;

struct CandidateSet {
  std::vector<Candidate> cands;
  double product_size = 0;  ///< size of the unconstrained Cartesian product (per-type sum for layers)
  bool sampled = false;     ///< true when the product exceeded max_candidates and was sampled
  int64_t rejected = 0;     ///< combinations that failed a constraint
};

/// Constrained Cartesian product (or, above max_candidates, that many distinct
/// random draws from it, std::mt19937_64(seed)). Throws when nothing satisfies
/// the constraints, naming the constraint that rejected most.
CandidateSet enumerate_candidates(const DesignSpace& sp, uint64_t seed);

/// The plan config of a candidate (layers: {"type","dims","dtype"}; models:
/// {"model","overrides","settings"}). Relative model paths are rewritten
/// relative to `plan_dir` (the directory of the plan file).
nlohmann::json candidate_config(const DesignSpace& sp, const Candidate& c, const std::string& plan_dir = "");

/// Feature encoding a_i: intercept, numeric main effects scaled to [-1, 1] (log
/// for sizes), one-hot categoricals with the first level dropped (the intercept
/// makes the full one-hot collinear), then for "interactions" all pairwise
/// products of main-effect columns of different parameters and for "quadratic"
/// also squares of numeric parameters with >= 3 levels. Inactive parameters
/// encode as 0 (their main effect is then nested in the activating category).
class Encoder {
 public:
  /// Builds the term list and drops columns that are zero or linearly dependent
  /// on earlier ones over `cands` (Gram-Schmidt on the Gram matrix), so that
  /// M can be non-singular; dropped terms are listed in dropped().
  Encoder(const DesignSpace& sp, const std::vector<Candidate>& cands);
  int p() const { return static_cast<int>(names_.size()); }
  const std::vector<std::string>& term_names() const { return names_; }
  /// Terms collinear with earlier ones on the candidates (not identifiable), dropped.
  const std::vector<std::string>& dropped() const { return dropped_; }
  /// Number of terms dropped because they are zero on every candidate (e.g. the
  /// product of two dims that never occur in the same layer type).
  int zero_terms() const { return zero_terms_; }
  FeatureMatrix encode(const std::vector<Candidate>& cands) const;
  /// Encodes an already-measured point given as parameter values (numbers or labels;
  /// null = inactive). Numeric values outside the space are allowed; unknown labels throw.
  Eigen::RowVectorXd encode_values(const std::vector<nlohmann::json>& values) const;

 private:
  /// main-effect columns of one point: per parameter, numeric value or one-hot.
  std::vector<double> raw(const std::vector<double>& num, const std::vector<int>& level) const;
  const DesignSpace* sp_;
  std::vector<std::vector<int>> terms_;  // kept raw terms: product of main-effect column ids
  std::vector<std::string> names_, dropped_;
  int zero_terms_ = 0;
  std::vector<std::string> main_names_;
  std::vector<int> main_param_;  // parameter of each main-effect column
  std::vector<int> main_level_;  // categorical level (or -1 numeric)
};

/// Parameter values of measured points read from a campaign store, aligned with
/// sp.params (null where inactive). Points that do not fit the space (other
/// layer type, unknown category) are skipped and counted in `skipped`.
std::vector<std::vector<nlohmann::json>> existing_points(const DesignSpace& sp, const std::string& store_path,
                                                         int64_t& skipped);

/// Options of make_plan(); the CLI fills them.
struct PlanOptions {
  int budget = 0;        ///< new configs to choose (K), >= 1
  uint64_t seed = 0;     ///< std::mt19937_64 seed
  int starts = 4;        ///< Fedorov random starts, >= 1
  int threads = 2;       ///< worker threads for the starts, >= 1
  std::string existing;  ///< campaign store whose measured points stay in the design ("" = none)
  std::string plan_dir;  ///< directory of the plan file (relative model paths)
};

/// The whole `scaledl plan`: candidates, encoding, Fedorov exchange. Returns the
/// plan JSON {"kind","configs",[...],"design":{log_det, d_efficiency_vs_random,
/// terms, k, m, p, seed, ...}}.
nlohmann::json make_plan(const DesignSpace& sp, const PlanOptions& opt);

}  // namespace scaledl
