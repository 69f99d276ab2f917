// scaledl db export|info: read a results store.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "command.hpp"
#include "scaledl/error.hpp"
#include "scaledl/json_util.hpp"
#include "scaledl/store.hpp"

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
  Store s(o.db, /*read_only=*/true);
  std::string text;
  if (o.format == "csv") {
    std::ostringstream ss;
    s.export_csv(o.table, ss);
    text = ss.str();
  } else {
    nlohmann::json all = s.export_json();
    SCALEDL_CHECK(all.contains(o.table),
                  "--table={} is not a table (layers, models, devices, environments, collectives)", o.table);
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
  for (const auto& [k, v] : info["counts"].items()) std::printf("  %-13s %lld rows\n", k.c_str(), static_cast<long long>(v.get<int64_t>()));
  for (const auto& d : info["devices"]) std::printf("  device       %s\n", d.get<std::string>().c_str());
  for (const auto& g : info["layer_groups"])
    std::printf("  layers       campaign=%s device=%s status=%s: %lld rows, median fwd cv %.3f, max %.3f\n",
                g["campaign"].get<std::string>().c_str(), g["device"].get<std::string>().c_str(),
                g["status"].get<std::string>().c_str(), static_cast<long long>(g["rows"].get<int64_t>()),
                g["fwd_cv_median"].is_null() ? 0.0 : g["fwd_cv_median"].get<double>(),
                g["fwd_cv_max"].is_null() ? 0.0 : g["fwd_cv_max"].get<double>());
  for (const auto& g : info["model_groups"])
    std::printf("  models       campaign=%s device=%s status=%s: %lld rows\n", g["campaign"].get<std::string>().c_str(),
                g["device"].get<std::string>().c_str(), g["status"].get<std::string>().c_str(),
                static_cast<long long>(g["rows"].get<int64_t>()));
  return 0;
}

scaledl::cli::Registrar reg_export({"db", "export"}, "Export a table of a results store as CSV or JSON",
                                   [](CLI::App& app) {
                                     auto o = std::make_shared<DbOptions>();
                                     app.add_option("--db", o->db, "SQLite results store")->required();
                                     app.add_option("--format", o->format, "csv or json")->capture_default_str();
                                     app.add_option("--table", o->table, "layers, models, devices, environments or collectives")
                                         ->capture_default_str();
                                     app.add_option("--out", o->out, "output file (default: stdout)");
                                     return [o] { return run_export(*o); };
                                   });

scaledl::cli::Registrar reg_info({"db", "info"}, "Summarise a results store: rows per table, campaign, device, status",
                                 [](CLI::App& app) {
                                   auto o = std::make_shared<DbOptions>();
                                   app.add_option("--db", o->db, "SQLite results store")->required();
                                   app.add_flag("--json", o->json, "print JSON");
                                   return [o] { return run_info(*o); };
                                 });

}  // namespace
