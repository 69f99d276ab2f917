// scaledl: predict the training time of Transformer models on a cluster.
// Thin by design: parse, call the library, print. This is the one place where
// errors become a single "scaledl: error: ..." line and a non-zero exit.
#if defined(__linux__)
#include <malloc.h>  // mallopt (glibc)
#endif
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_checks.hpp"
#include "command.hpp"
#ifdef SCALEDL_LIGHT
#include "sibling.hpp"
#endif
#include "scaledl/core/error.hpp"
#include "scaledl/core/message.hpp"

namespace scaledl::cli {
bool stdout_is_tty() {
  return isatty(fileno(stdout)) != 0;
}
bool stderr_is_tty() {
  return isatty(fileno(stderr)) != 0;
}
ProgressMode progress_mode(bool quiet) {
  if (quiet) return ProgressMode::Off;
  return stderr_is_tty() ? ProgressMode::Bar : ProgressMode::Lines;
}
}  // namespace scaledl::cli

namespace {

using scaledl::first_line;
using scaledl::one_line;

}  // namespace

int main(int argc, char** argv) {
  using namespace scaledl::cli;
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD)
  // Keep freed memory for reuse instead of returning it to the system: glibc maps blocks over
  // 128 KB afresh and trims the heap, so every new tensor of a forward pass (the refinement,
  // LibTorch's CPU allocator is plain malloc) and every graph touches new pages, and on the VMs
  // this runs on a page fault is dear (a lone predict of a 7B model at batch 32 x 4,096: the
  // refinement's pass over its 241 graphs in batches of 16, 0.15 -> 0.05 s; docs/predict.md,
  // "Speed"). Blocks of 32 MB or more are still mapped and unmapped.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
  CLI::App app{
      "ScaleDL: predict per-iteration and per-epoch training time of Transformer models\n"
      "from layer microbenchmarks, XGBoost layer regressors and graph refinement."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "scaledl 0.1.0");

  auto defs = registry();
  std::set<std::string> commands;  // the top-level command names of this binary
  for (const auto& d : defs) commands.insert(d.path.front());
  const std::string first = argc > 1 ? argv[1] : "";
#ifdef SCALEDL_LIGHT
  // This `scaledl` holds the commands that predict or plan and links no LibTorch (whose start-up
  // alone costs 0.4-0.8 s of a lone prediction); every other command, and the overview --help, is
  // scaledl-full's (tools/CMakeLists.txt).
  if (first != "--version" && !commands.count(first)) {
    try {
      exec_sibling("scaledl-full", std::vector<std::string>(argv, argv + argc));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "scaledl: error: %s\n", one_line(e.what()).c_str());
      return 1;
    }
  }
#endif
  std::sort(defs.begin(), defs.end(),
            [](const CommandDef& a, const CommandDef& b) { return a.path < b.path; });
  std::map<std::string, CLI::App*> groups;  // "bench" -> its CLI11 node
  Runner chosen;
  // A command may also be a group: `train` runs itself, `train layers` its
  // subcommand (sorted order registers the group's own command first).
  std::set<std::string> runnable;  // "/train", "/train/layers", ...
  for (auto& d : defs) {
    std::string key;
    for (auto& p : d.path) key += "/" + p;
    runnable.insert(key);
  }
  for (auto& d : defs) {
    CLI::App* parent = &app;
    std::string prefix;
    for (size_t i = 0; i + 1 < d.path.size(); ++i) {
      prefix += "/" + d.path[i];
      auto it = groups.find(prefix);
      if (it == groups.end()) {
        CLI::App* g = parent->add_subcommand(d.path[i], d.path[i] + " commands");
        g->require_subcommand(1);
        it = groups.emplace(prefix, g).first;
      }
      parent = it->second;
    }
    const std::string key = prefix + "/" + d.path.back();
    CLI::App* sub = parent->add_subcommand(d.path.back(), d.help);
    auto runner = std::make_shared<Runner>(d.setup(*sub));
    // A group when some command's path continues this one ("/train/..." after "/train").
    auto next = runnable.upper_bound(key + "/");
    const bool group = next != runnable.end() && next->compare(0, key.size() + 1, key + "/") == 0;
    if (group) {
      sub->require_subcommand(0, 1);
      groups.emplace(key, sub);
      sub->callback([runner, sub, &chosen] {
        if (sub->get_subcommands().empty()) chosen = *runner;
      });
    } else {
      sub->callback([runner, &chosen] { chosen = *runner; });
    }
  }

  // CLI11 says only "A subcommand is required" for an unknown one: name it and the commands.
  if (!first.empty() && first[0] != '-' && !commands.count(first)) {
    std::string all;
    for (const auto& c : commands) all += (all.empty() ? "" : ", ") + c;
    std::fprintf(stderr, "scaledl: error: '%s' is not a command (one of %s; see --help)\n",
                 one_line(first).c_str(), all.c_str());
    return 1;
  }
  refuse_integer_overflow(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's own failure text is two lines and a 10x exit status; keep the one
    // "scaledl: error:" line and exit 1 like every other bad input.
    std::string what = first_line(e.what());
    if (what.empty()) what = e.get_name();
    std::fprintf(stderr, "scaledl: error: %s (see --help)\n", one_line(what).c_str());
    return 1;
  } catch (const std::exception& e) {  // a flag's own conversion (CLI11 lets std::invalid_argument through)
    std::fprintf(stderr, "scaledl: error: a flag's value could not be read: %s (see --help)\n",
                 one_line(first_line(e.what())).c_str());
    return 1;
  }
  try {
    return chosen ? chosen() : 0;
  } catch (const scaledl::Error& e) {
    std::fprintf(stderr, "scaledl: error: %s\n", one_line(e.what()).c_str());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "scaledl: error: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaledl: error: %s\n", one_line(first_line(e.what())).c_str());
  }
  return 1;
}
