#pragma once
// Internals shared by the design-stage sources (not a public header).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "design/expr.hpp"
#include "scaledl/design/space.hpp"

namespace scaledl::design_detail {

using nlohmann::json;

/// HF config keys that a canonical models-space name is written to (empty if not canonical).
const std::vector<std::string>& model_aliases(const std::string& canonical);
/// Key of ModelSpec::to_json() holding a canonical name (nullptr if none).
const char* model_spec_key(const std::string& canonical);

/// A space with its expressions compiled and its base model configs loaded.
struct Compiled {
  explicit Compiled(const DesignSpace& s);
  const DesignSpace* sp;
  std::vector<std::string> slot_names;  ///< params, derived, fixed keys
  std::vector<Expr> derived;
  std::vector<Expr> constraints;  ///< empty Expr slot for memory constraints
  int type_param = -1, dtype_param = -1, model_param = -1;
  std::vector<std::string> base_paths;  ///< models: absolute path per model level ("" = inline)
  std::vector<json> base_configs;       ///< models: config object per model level

  std::string layer_type_label(const Candidate& c) const;
  bool is_dim_name(const std::string& n) const;
  bool is_active(size_t param, const Candidate& c, const std::string& type_label) const;
  std::vector<Value> slots(const Candidate& c) const;
  /// Index of the first failing constraint; constraints.size() when the config is
  /// not a valid layer/model (message in *why); -1 when everything holds.
  int violated(const Candidate& c, std::string* why = nullptr) const;
  json config(const Candidate& c, const std::string& plan_dir) const;
  /// Throws Error when the config is not valid for the IR (validate_dims,
  /// parse_model_config + validate_settings); returns estimated memory, bytes.
  double check_and_memory(const Candidate& c) const;
};

}  // namespace scaledl::design_detail
