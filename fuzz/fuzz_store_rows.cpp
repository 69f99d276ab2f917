// The JSON columns of campaign-store rows (io/store.cpp) and what reads them:
// layers.dims, devices.record, models.model, models.settings, models.node_times,
// plus text in the numeric timing columns. The fuzzed text is written into one
// column of an otherwise valid row of an in-memory store with plain SQL (as a
// damaged or hand-edited store would hold it), then read back through Store and
// the consumers (validate_dims, model_spec_from_json, parse_train_settings).
//
// Input: first byte % 6 picks the column (0 dims, 1 record, 2 model, 3 settings,
// 4 node_times, 5 layers.fwd_median_ms); the rest is the column's text.
#include <sqlite3.h>

#include <memory>

#include "fuzz_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/model_spec.hpp"

using namespace scaledl;

namespace {

Store& store() {
  static std::unique_ptr<Store> s = std::make_unique<Store>(":memory:");
  return *s;
}

void exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(store().handle(), sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : "?";
    sqlite3_free(err);
    fuzz::bug("SQL failed: " + m + " in " + sql);
  }
}

/// Binds text `v` to parameter i of `sql` and runs it once.
void insert(const std::string& sql, const std::vector<std::string>& texts) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(store().handle(), sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
    fuzz::bug(std::string("prepare failed: ") + sqlite3_errmsg(store().handle()));
  for (size_t i = 0; i < texts.size(); ++i)
    sqlite3_bind_text(st, static_cast<int>(i + 1), texts[i].data(), static_cast<int>(texts[i].size()),
                      SQLITE_TRANSIENT);
  const int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) fuzz::bug(std::string("insert failed: ") + sqlite3_errmsg(store().handle()));
}

const std::string& good_model() {
  static const std::string s = [] {
    const json cfg = {{"model_type", "bert"},     {"hidden_size", 64},        {"num_hidden_layers", 1},
                      {"num_attention_heads", 2}, {"intermediate_size", 128}, {"vocab_size", 1000}};
    return parse_model_config(cfg).to_json().dump();
  }();
  return s;
}

const std::string& good_device() {
  static const std::string s = [] {
    DeviceRecord d;
    d.name = "fuzz";
    d.kind = "spec";
    d.cores = 1;
    d.peak_fp32_gflops = 1000;
    d.peak_mem_bw_gbs = 100;
    return d.to_json().dump();
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int col = data[0] % 6;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  exec("DELETE FROM layers; DELETE FROM models; DELETE FROM devices;");
  const std::string device_record = col == 1 ? text : good_device();
  insert("INSERT INTO devices(key, name, kind, record) VALUES ('spec:fuzz', 'fuzz', 'spec', ?1)",
         {device_record});
  insert(
      "INSERT INTO layers(campaign, config_key, device, layer_type, dims, dtype, status, fwd_median_ms, "
      "fwd_n, source)"
      " VALUES ('c', 'k', 'spec:fuzz', 'linear', ?1, 'fp32', 'ok', ?2, 5, 'bench')",
      {col == 0 ? text : std::string("[128,768,3072,1]"), col == 5 ? text : std::string("0.5")});
  insert(
      "INSERT INTO models(campaign, config_key, device, model_name, family, model, settings, status,"
      " iter_median_ms, iter_n, node_times, source)"
      " VALUES ('c', 'k', 'spec:fuzz', 'bert', 'bert', ?1, ?2, 'ok', 12.5, 5, ?3, 'bench')",
      {col == 2 ? text : good_model(), col == 3 ? text : TrainSettings{}.to_json().dump(),
       col == 4 ? text : std::string(R"([["embeddings", 0.25], ["encoder.0.attn", null]])")});
  Store& s = store();
  fuzz::guarded([&] {
    for (const auto& d : s.devices()) (void)d.features();
  });
  fuzz::guarded([&] { (void)s.device("spec:fuzz"); });
  fuzz::guarded([&] {
    for (const auto& m : s.layers(std::nullopt, "", /*ok_only=*/false)) validate_dims(m.type, m.dims);
  });
  fuzz::guarded([&] {
    for (const auto& m : s.models("", /*ok_only=*/false)) {
      const ModelSpec spec = model_spec_from_json(m.model, "models.model");
      const TrainSettings st = parse_train_settings(m.settings, "models.settings");
      validate_settings(spec, st);
      (void)model_key(m);
    }
  });
  return 0;
}
