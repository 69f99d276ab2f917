#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Many configurations of one `predict` call (no LibTorch): the --sweep lists (a cartesian product
// held as an index space, never materialised), the rows of a --csv / --anchor file, the keys and
// values they may give, and the running maximum along batch and seq kept across the chunks a
// sweep is predicted in (docs/predict.md, "Many configurations").
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/ir/model_spec.hpp"
#include "scaledl/predict/predict.hpp"

namespace scaledl {

/// One configuration of a sweep or CSV row: the model file and KEY=VALUE overrides
/// (keys of sweep_setting_keys() or config.<key of config.json>).
struct Variant {
  std::string model;
  std::vector<std::pair<std::string, std::string>> kv;
};

/// The settings keys a sweep or CSV may give: batch, seq, image, dtype, optimizer, mode,
/// devices, samples, device_spec.
const std::vector<std::string>& sweep_setting_keys();

/// Throws Error naming `ctx` unless `key` is a settings key or config.<key>.
void check_sweep_key(const std::string& key, const std::string& ctx);

/// An integer value of `key` in [lo, hi]; throws Error naming key and value.
int64_t parse_setting_int(const std::string& v, const std::string& key, int64_t lo, int64_t hi);

/// The value of a config.<key> override as config.json would hold it: an integer, a finite
/// number (capacity_factor=1.25), true/false, or a string (hidden_act=gelu_new).
nlohmann::json config_value(const std::string& v, const std::string& key);

/// device_spec values: a folder stands for its *.json files in name order.
std::vector<std::string> expand_device_specs(const std::vector<std::string>& values);

/// The cartesian product of --sweep lists over one model, without holding it: variant i is made
/// on demand (the last list varies fastest).
struct SweepSpace {
  std::string model;
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;  ///< key, values
  size_t size() const;
  Variant at(size_t i) const;
};

/// Parses the --sweep arguments ("KEY=V1,V2,..."; batch, seq, image and devices also take
/// ranges "A..B"; a device_spec folder stands for its sheets). Throws Error on a malformed list,
/// an unknown or repeated key, or more than 10,000,000 configurations.
SweepSpace sweep_space(const std::string& model, const std::vector<std::string>& sweeps);

/// One variant per data row of CSV `text` read from `path` (option `opt` in messages): the header
/// names the columns (model, the settings keys, config.<key>); empty cells keep the default; a
/// relative model or device_spec is relative to the CSV's folder; `default_model` is used where a
/// row has none. With `measured`, a column measured_ms is required (each row's measured
/// iteration time, ms, > 0). A UTF-8 BOM is skipped; a repeated column is an error.
std::vector<Variant> csv_variants_text(const std::string& text, const std::string& path,
                                       const std::string& opt, const std::string& default_model,
                                       std::vector<double>* measured = nullptr);
/// csv_variants_text of the file `path`.
std::vector<Variant> csv_variants(const std::string& path, const std::string& opt,
                                  const std::string& default_model, std::vector<double>* measured = nullptr);

/// The running maximum along batch and along seq among the configurations of one call, across
/// the chunks it is predicted in (Bundle::predict_many keeps it inside one chunk): per group of
/// configurations that differ in that setting only (same label and device), a prediction is
/// raised to the largest one met so far at a smaller value, in the order given.
class SweepMonotone {
 public:
  void apply(IterationPrediction& p, const std::string& label, const std::string& device,
             const TrainSettings& s);

 private:
  std::map<std::string, std::pair<int64_t, IterationPrediction>> best_[2];
};

}  // namespace scaledl
