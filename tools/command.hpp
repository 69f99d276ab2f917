#pragma once
// Subcommand registry of the `scaledl` tool. Each tools/cmd_<name>.cpp defines
//
//   static scaledl::cli::Registrar reg({"bench", "layers"}, "Time layer configs",
//       [](CLI::App& app) {
//         auto o = std::make_shared<Options>();
//         app.add_option("--plan", o->plan, "plan JSON")->required();
//         return [o] { ...call the library, print...; return 0; };
//       });
//
// main.cpp builds the CLI11 tree from all registrars, runs the chosen command,
// and is the one place that turns an exception into "scaledl: error: <line>".
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "scaledl/core/progress.hpp"

namespace scaledl::cli {

using Runner = std::function<int()>;
using Setup = std::function<Runner(CLI::App&)>;

struct CommandDef {
  std::vector<std::string> path;  ///< e.g. {"bench", "layers"}
  std::string help;
  Setup setup;
};

inline std::vector<CommandDef>& registry() {
  static std::vector<CommandDef> r;
  return r;
}

struct Registrar {
  Registrar(std::vector<std::string> path, std::string help, Setup setup) {
    registry().push_back({std::move(path), std::move(help), std::move(setup)});
  }
};

/// True when stdout is a terminal (progress bars and colours only then).
bool stdout_is_tty();
bool stderr_is_tty();
/// Progress of a long command: a bar on a terminal, a line every few seconds in a log, none with --quiet.
ProgressMode progress_mode(bool quiet);

}  // namespace scaledl::cli
