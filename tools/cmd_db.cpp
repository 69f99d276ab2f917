// scaledl db export|info: read a results store; db merge: combine stores.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "command.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"

namespace {

struct DbOptions {
  std::string db;                ///< SQLite store
  std::string format = "csv";    ///< csv | json
  std::string table = "layers";  ///< layers | models | devices | environments (json: "" = all)
  std::string out;               ///< output file ("" = stdout)
  bool json = false;             ///< info: print JSON
};

void require_file(const std::string& p) {
  std::ifstream f(p);
  SCALEDL_CHECK(f.good(), "--db={}: no such store", p);
}

int run_export(const DbOptions& o) {
  using namespace scaledl;
  SCALEDL_CHECK(o.format == "csv" || o.format == "json", "--format={} is not an export format (csv or json)",
                o.format);
  require_file(o.db);
  check_output_is_not_input(o.out, "--out", {{"--db", o.db}});
  Store s(o.db, /*read_only=*/true);
  std::string text;
  if (o.format == "csv") {
    std::ostringstream ss;
    s.export_csv(o.table, ss);
    text = ss.str();
  } else {
    nlohmann::json all = s.export_json();
    SCALEDL_CHECK(
        all.contains(o.table),
        "--table={} is not a table (layers, models, devices, environments, collectives, memory, pipeline)",
        o.table);
    text = all[o.table].dump(1) + "\n";
  }
  if (o.out.empty())
    std::fwrite(text.data(), 1, text.size(), stdout);
  else
    write_text_file_atomic(o.out, text);
  return 0;
}

int run_info(const DbOptions& o) {
  using namespace scaledl;
  require_file(o.db);
  Store s(o.db, /*read_only=*/true);
  nlohmann::json info = s.info();
  if (o.json) {
    std::printf("%s\n", info.dump(2).c_str());
    return 0;
  }
  std::printf("store %s (schema %s)\n", o.db.c_str(), info["schema_version"].get<std::string>().c_str());
  for (const auto& [k, v] : info["counts"].items())
    std::printf("  %-13s %lld rows\n", k.c_str(), static_cast<long long>(v.get<int64_t>()));
  for (const auto& d : info["devices"]) std::printf("  device       %s\n", d.get<std::string>().c_str());
  for (const auto& g : info["layer_groups"])
    std::printf("  layers       campaign=%s device=%s status=%s: %lld rows, median fwd cv %.3f, max %.3f\n",
                g["campaign"].get<std::string>().c_str(), g["device"].get<std::string>().c_str(),
                g["status"].get<std::string>().c_str(), static_cast<long long>(g["rows"].get<int64_t>()),
                g["fwd_cv_median"].is_null() ? 0.0 : g["fwd_cv_median"].get<double>(),
                g["fwd_cv_max"].is_null() ? 0.0 : g["fwd_cv_max"].get<double>());
  for (const auto& g : info["model_groups"])
    std::printf("  models       campaign=%s device=%s status=%s: %lld rows\n",
                g["campaign"].get<std::string>().c_str(), g["device"].get<std::string>().c_str(),
                g["status"].get<std::string>().c_str(), static_cast<long long>(g["rows"].get<int64_t>()));
  return 0;
}

scaledl::cli::Registrar reg_export(
    {"db", "export"}, "Export a table of a results store as CSV or JSON", [](CLI::App& app) {
      auto o = std::make_shared<DbOptions>();
      app.add_option("--db", o->db, "SQLite results store")->required();
      app.add_option("--format", o->format, "csv or json")->capture_default_str();
      app.add_option("--table", o->table,
                     "layers, models, devices, environments, collectives, memory, pipeline or layer_passes")
          ->capture_default_str();
      app.add_option("--out", o->out, "output file (default: stdout)");
      return [o] { return run_export(*o); };
    });

scaledl::cli::Registrar reg_info({"db", "info"},
                                 "Summarise a results store: rows per table, campaign, device, status",
                                 [](CLI::App& app) {
                                   auto o = std::make_shared<DbOptions>();
                                   app.add_option("--db", o->db, "SQLite results store")->required();
                                   app.add_flag("--json", o->json, "print JSON");
                                   return [o] { return run_info(*o); };
                                 });

// ---- db merge ----------------------------------------------------------------

struct MergeOptions {
  std::string out;                  ///< store written to (created when missing)
  std::vector<std::string> inputs;  ///< stores read, in order; never modified
};

int run_merge(const MergeOptions& o) {
  using namespace scaledl;
  namespace fs = std::filesystem;
  SCALEDL_CHECK(!o.out.empty(), "db merge: OUT is missing (scaledl db merge OUT IN...)");
  SCALEDL_CHECK(!o.inputs.empty(), "db merge {}: no input store given (scaledl db merge OUT IN...)", o.out);
  // Every input is opened (so checked to be a ScaleDL store this build reads)
  // before OUT is created or touched.
  std::vector<std::unique_ptr<Store>> ins;
  for (const auto& in : o.inputs) {
    check_output_is_not_input(o.out, "OUT", {{"IN", in}});
    ins.push_back(std::make_unique<Store>(in, /*read_only=*/true));
  }
  std::error_code ec;
  const bool existed = fs::exists(o.out, ec);
  // A new OUT is removed whole (with SQLite's side files) if the merge fails or is interrupted.
  const std::vector<std::string> created =
      existed ? std::vector<std::string>{}
              : std::vector<std::string>{o.out, o.out + "-wal", o.out + "-shm", o.out + "-journal"};
  for (const auto& f : created) register_temp_path(f);
  std::vector<MergeSummary> sums;
  nlohmann::json counts;
  try {
    Store out(o.out);
    // One transaction over all inputs (each input's merge is a savepoint in
    // it): a failure anywhere leaves OUT as it was.
    Store::Transaction tx(out);
    for (const auto& in : ins) sums.push_back(out.merge_from(*in));
    tx.commit();
    counts = out.counts();
  } catch (...) {
    for (const auto& f : created) fs::remove(f, ec);
    for (const auto& f : created) unregister_temp_path(f);
    throw;
  }
  for (const auto& f : created) unregister_temp_path(f);
  size_t added = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    const MergeSummary& m = sums[i];
    for (const auto& c : m.device_conflicts)
      std::fprintf(stderr, "scaledl: warning: %s: another record of device %s; kept the one in %s\n",
                   o.inputs[i].c_str(), c.c_str(), o.out.c_str());
    std::printf(
        "%s: %zu rows added, %zu skipped (already in %s): layers %zu added, %zu skipped; models %zu added, "
        "%zu skipped; collectives %zu added, %zu skipped; %zu new devices, %zu new environments\n",
        o.inputs[i].c_str(), m.rows_added(), m.rows_skipped(), o.out.c_str(), m.layers_added,
        m.layers_skipped, m.models_added, m.models_skipped, m.collectives_added, m.collectives_skipped,
        m.devices_added, m.environments_added);
    added += m.rows_added();
  }
  std::printf("%s: %zu rows added from %zu stores; now %lld layer rows, %lld model rows, %lld devices\n",
              o.out.c_str(), added, ins.size(), static_cast<long long>(counts.value("layers", int64_t{0})),
              static_cast<long long>(counts.value("models", int64_t{0})),
              static_cast<long long>(counts.value("devices", int64_t{0})));
  return 0;
}

scaledl::cli::Registrar reg_merge(
    {"db", "merge"},
    "Merge stores (e.g. the shards of a campaign) into OUT without duplicates: scaledl db merge OUT IN...",
    [](CLI::App& app) {
      auto o = std::make_shared<MergeOptions>();
      app.add_option("OUT", o->out, "store to merge into (created if missing)");
      app.add_option("IN", o->inputs, "stores to merge from, in order (read only)");
      return [o] { return run_merge(*o); };
    });

}  // namespace
