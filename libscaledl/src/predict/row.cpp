// The one output schema of many configurations (predict_api.hpp): PredictRow as JSON and CSV,
// and RowWriter, which streams them.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "scaledl/core/json_util.hpp"
#include "scaledl/predict/predict_api.hpp"

namespace scaledl {

const char* attention_kind(const TrainSettings& s) {
  if (s.attention == AttentionImpl::Fused) return "flash";
  return s.fused_kernels ? "fused" : "eager";
}

nlohmann::json PredictRow::to_json() const {
  const bool ok = infeasible.empty();
  nlohmann::json j = ok ? p.to_json() : nlohmann::json::object();
  if (!ok) j["infeasible"] = infeasible;
  j["model"] = label;
  j["settings"] = settings.to_json();
  j["mode"] = to_string(run_mode(settings));
  j["attention"] = attention_kind(settings);
  j["iterations_per_epoch"] = iterations;
  j["t_epoch_s"] = iterations && ok ? nlohmann::json(iterations * p.t_iter_ms / 1e3) : nlohmann::json();
  j["device"] = device;
  if (price_per_gpu_hour > 0) {
    j["price_per_gpu_hour"] = price_per_gpu_hour;
    j["cost_per_epoch"] = cost_per_epoch() > 0 ? nlohmann::json(cost_per_epoch()) : nlohmann::json();
  }
  if (ok) {
    if (device_layer_rows) j["device_layer_rows"] = *device_layer_rows;
    if (!calibration.is_null()) j["calibration"] = calibration;
    j["memory"] = memory.to_json();
  }
  return j;
}

const std::string& PredictRow::csv_header() {
  static const std::string h =
      "model,batch,seq,image,dtype,optimizer,devices,t_sum_ms,t_comm_ms,alpha,beta,t_iter_ms,lo80_ms,"
      "hi80_ms,lo95_ms,hi95_ms,out_of_domain,iterations,t_epoch_s,t_model_ms,t_roofline_ms,adjusted,"
      "mode,device,peak_memory_gb,memory,attention,infeasible,price_per_gpu_hour,cost_per_epoch";
  return h;
}

double PredictRow::cost_per_epoch() const {
  if (!(price_per_gpu_hour > 0) || iterations <= 0 || !infeasible.empty() || !(p.t_iter_ms > 0)) return 0;
  return price_per_gpu_hour * static_cast<double>(settings.num_devices) * static_cast<double>(iterations) *
         p.t_iter_ms / 3.6e6;
}

std::string PredictRow::to_csv() const {
  const TrainSettings& s = settings;
  const int64_t it = iterations;
  const char* optimizer = s.optimizer_step ? to_string(s.optimizer) : "none";
  const std::string price = price_per_gpu_hour > 0 ? fmt::format("{:.6g}", price_per_gpu_hour) : "";
  const std::string cost = cost_per_epoch() > 0 ? fmt::format("{:.6g}", cost_per_epoch()) : "";
  if (!infeasible.empty())  // the settings, the device and why; no times
    return fmt::format("{},{},{},{},{},{},{},,,,,,,,,,,{},,,,,{},{},,,{},{},{},", csv_quote(label), s.batch,
                       s.seq_len, s.image_size, dtype_recipe(s), optimizer, s.num_devices, it,
                       csv_field(to_string(run_mode(s))), csv_quote(device), attention_kind(s),
                       csv_field(infeasible), price);
  auto num = [](double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string(); };
  return fmt::format(
      "{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{},{},{},{},{},{},{},{},{},{:.4g},{},"
      "{},,{},{}",
      csv_quote(label), s.batch, s.seq_len, s.image_size, dtype_recipe(s), optimizer, s.num_devices,
      p.t_sum_ms, p.t_comm_ms, p.alpha, p.beta, p.t_iter_ms, num(p.lo80_ms), num(p.hi80_ms), num(p.lo95_ms),
      num(p.hi95_ms), p.ood_distance > 0 ? 1 : 0, it,
      it ? fmt::format("{:.6g}", it * p.t_iter_ms / 1e3) : std::string(),
      p.t_roofline_ms > 0 ? num(p.t_model_ms) : std::string(),
      p.t_roofline_ms > 0 ? num(p.t_roofline_ms) : std::string(), csv_field(p.adjusted),
      csv_field(to_string(run_mode(s))), csv_quote(device), memory.peak_bytes / 1e9,
      csv_field(memory.verdict), attention_kind(s), price, cost);
}

void RowWriter::write(const std::vector<PredictRow>& rows) {
  for (const PredictRow& row : rows) {
    if (json_) {
      // One element of a JSON array indented by 2, as nlohmann's dump(2) of the whole array.
      const std::string text = row.to_json().dump(2);
      std::string indented = "  ";
      for (char ch : text) indented += ch == '\n' ? std::string("\n  ") : std::string(1, ch);
      out_ << (first_ ? "[\n" : ",\n") << indented;
    } else {
      if (first_) out_ << PredictRow::csv_header() << "\n";
      out_ << row.to_csv() << "\n";
    }
    first_ = false;
  }
  out_.flush();
}

void RowWriter::finish() {
  if (json_) out_ << (first_ ? "[]\n" : "\n]\n");
}

}  // namespace scaledl
