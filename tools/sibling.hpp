#pragma once
// Running another tool built (and installed) beside this binary, with the same arguments:
// scaledl-pipeline for the SentencePiece commands (pipeline_forward.cpp) and, from the light
// `scaledl`, scaledl-full for every command that needs LibTorch (main.cpp, tools/CMakeLists.txt).
// exec keeps the tool's output, its one `scaledl: error:` line and its exit status as they are.
#include <string>
#include <vector>

namespace scaledl::cli {

/// This process's arguments, argv[0] first (/proc/self/cmdline).
std::vector<std::string> this_process_args();

/// Replaces this process by `tool` from this binary's directory with `args` (argv[0] kept, so
/// usage lines still say `scaledl`); throws naming the tool and how to build it if it cannot run.
[[noreturn]] void exec_sibling(const std::string& tool, std::vector<std::string> args);

/// Runs `tool` from this binary's directory with `args` (argv[0] first) and returns what it wrote
/// to stdout; its stderr passes through. Throws naming the tool when it cannot run, and with its
/// own last error line when it exits non-zero.
std::string run_sibling(const std::string& tool, std::vector<std::string> args);

}  // namespace scaledl::cli
