// `scaledl bench pipeline` and `scaledl train tokenizer` (issue #15) run the
// scaledl-pipeline tool built beside this binary, with the same arguments: they
// need SentencePiece, which cannot share a process with LibTorch
// (scaledl/text_pipeline.hpp). The commands themselves are
// cmd_bench_pipeline.cpp and cmd_train_tokenizer.cpp; exec keeps their output,
// their one `scaledl: error:` line and their exit status as they are.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "command.hpp"
#include "scaledl/core/error.hpp"

namespace {

[[noreturn]] void exec_pipeline_tool() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  SCALEDL_CHECK(!ec, "cannot find this program's path (/proc/self/exe): {}", ec.message());
  const std::string tool = (self.parent_path() / "scaledl-pipeline").string();
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  SCALEDL_CHECK(!args.empty(), "cannot read this program's arguments (/proc/self/cmdline)");
  // argv[0] stays this program's name: the tool's --help and usage say `scaledl`.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(tool.c_str(), argv.data());
  scaledl::fail("cannot run {}: {} (it is built with scaledl: cmake --build BUILD --target scaledl-pipeline)",
                tool, std::strerror(errno));
}

/// Every argument, --help included, goes to scaledl-pipeline.
scaledl::cli::Runner forward(CLI::App& app) {
  app.prefix_command();
  app.set_help_flag();
  return []() -> int { exec_pipeline_tool(); };
}

scaledl::cli::Registrar bench_reg({"bench", "pipeline"},
                                  "Samples/s of real input pipelines (tokenise; JPEG decode + crop + flip + "
                                  "normalise) per worker thread, and a "
                                  "file's read rate (runs scaledl-pipeline)",
                                  forward);
scaledl::cli::Registrar train_reg({"train", "tokenizer"},
                                  "Train a SentencePiece tokenizer on a text corpus (runs scaledl-pipeline)",
                                  forward);

}  // namespace
