#pragma once
// Shared by the model-config tests (test_model_spec.cpp, test_model_types.cpp): the shipped
// configs by name, and the one-line error of a config that is refused.
#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl::test {

/// models/<name>.json of the source tree.
inline std::string model_path(const std::string& name) {
  return std::string(SCALEDL_SOURCE_DIR) + "/models/" + name + ".json";
}
/// The JSON of models/<name>.json.
inline json load(const std::string& name) {
  return read_json_file(model_path(name));
}
/// Error message of parse_model_config, "" when it succeeds.
inline std::string parse_error(const json& j) {
  try {
    parse_model_config(j, "config");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace scaledl::test
