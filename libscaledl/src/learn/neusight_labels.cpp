// Importer of the NeuSight artifact's end-to-end labels (see neusight.hpp):
// labels/<GPU>/<model>-<inf|train>-<seq>-<batch>[suffix].json -> model runs.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/learn/neusight.hpp"

namespace scaledl {

namespace fs = std::filesystem;

nlohmann::json NeusightLabelSummary::to_json() const {
  return {{"files", files}, {"inserted", inserted}, {"skipped", skipped}, {"per_device", per_device}};
}

std::optional<NeusightLabel> parse_neusight_label_name(const std::string& stem) {
  static const std::regex re(R"(^([A-Za-z0-9_.]+)-(inf|train)-([0-9]+)-([0-9]+)(-.*)?$)");
  std::smatch m;
  if (!std::regex_match(stem, m, re)) return std::nullopt;
  NeusightLabel l;
  l.model = m[1];
  l.mode = m[2] == "inf" ? RunMode::Inference : RunMode::FwdBwd;  // training labels have no optimizer step
  try {
    l.seq = std::stoll(m[3]);
    l.batch = std::stoll(m[4]);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  l.suffix = m[5].matched ? std::string(m[5]).substr(1) : std::string();
  return l;
}

std::vector<std::pair<std::string, std::string>> neusight_label_folders(const std::string& root) {
  std::vector<std::pair<std::string, std::string>> out;
  const fs::path labels = fs::path(root) / "labels";
  if (!fs::is_directory(labels)) return out;
  for (const auto& e : fs::directory_iterator(labels))
    if (e.is_directory()) {
      std::string dev_name = e.path().filename().string();
      std::replace(dev_name.begin(), dev_name.end(), '_', ' ');
      out.emplace_back(e.path().string(), dev_name);
    }
  std::sort(out.begin(), out.end());
  return out;
}

NeusightLabelSummary import_neusight_labels(const std::string& root, const std::string& campaign,
                                            Store& store,
                                            const std::map<std::string, std::string>& device_keys) {
  NeusightLabelSummary s;
  for (const auto& [dir_name, dev_name] : neusight_label_folders(root)) {
    const fs::path dir(dir_name);
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string where = f.string();
      ++s.files;
      auto lab = parse_neusight_label_name(f.stem().string());
      SCALEDL_CHECK(lab.has_value(), "{}: file name is not <model>-<inf|train>-<seq>-<batch>[-suffix].json",
                    where);
      if (!lab->suffix.empty()) {  // torch.compile fusion and multi-GPU Megatron runs: not single-GPU eager
        ++s.skipped[lab->suffix.rfind("fusion", 0) == 0 ? "fusion (torch.compile)"
                                                        : "multi-GPU (" + lab->suffix + ")"];
        continue;
      }
      auto dk = device_keys.find(dev_name);
      SCALEDL_CHECK(dk != device_keys.end(),
                    "{}: device \"{}\" (from the folder name) has no device_configs/*.json entry", where,
                    dev_name);
      const nlohmann::json j = read_json_file(where);
      SCALEDL_CHECK(j.is_object() && j.contains("e2e_latency") && j["e2e_latency"].is_number(),
                    "{}: e2e_latency is missing or not a number", where);
      const double ms = j["e2e_latency"].get<double>();
      SCALEDL_CHECK(std::isfinite(ms) && ms > 0 && ms < 1e8,
                    "{}: e2e_latency={} must be a positive time in ms", where, ms);
      const fs::path cfg = fs::path(root) / "model_configs" / (lab->model + ".json");
      SCALEDL_CHECK(fs::is_regular_file(cfg), "{}: model config {} is missing", where, cfg.string());
      ModelSpec m;
      try {
        m = parse_model_config(read_json_file(cfg.string()), cfg.string());
      } catch (const Error& e) {
        // A family the IR does not know yet is reported, not imported.
        ++s.skipped[fmt::format("model not supported ({})", lab->model)];
        continue;
      }
      m.name = lab->model;
      TrainSettings st;
      st.batch = lab->batch;
      st.seq_len = lab->seq;
      st.dtype = DType::FP32;  // the artifact: FP32, TF32 off
      set_run_mode(st, lab->mode);
      validate_settings(m, st);
      ModelMeasurement r;
      r.campaign = campaign;
      r.model_name = lab->model;
      r.family = to_string(m.family);
      r.model = m.to_json();
      r.settings = st.to_json();
      r.device = dk->second;
      r.iter.median_ms = ms;
      r.iter.n = 5;  // mean of the fastest 5 of 25 runs (artifact README)
      r.iter.cv = 0;
      r.source = "neusight";
      if (store.put_model(r)) {
        ++s.inserted;
        ++s.per_device[dev_name];
      }
    }
  }
  return s;
}

}  // namespace scaledl
