#pragma once
// Shared by the libFuzzer targets (fuzz/README.md, docs/hardening.md).
//
// Harness policy: a scaledl::Error is the expected outcome of bad input and is
// swallowed; any other exception escaping the library (nlohmann::json::type_error,
// std::out_of_range, std::invalid_argument, ...) is a bug, so the harness aborts
// and libFuzzer records the input as a crash. Crashes, hangs (-timeout), memory
// blow-ups (-rss_limit_mb) and sanitizer findings are bugs as well.
#include <cxxabi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"

namespace scaledl::fuzz {

inline std::string demangled(const std::type_info& t) {
  int status = 0;
  char* n = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string s = status == 0 && n ? n : t.name();
  std::free(n);
  return s;
}

[[noreturn]] inline void bug(const std::string& what) {
  std::fprintf(stderr, "\nfuzz: BUG: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Runs f(); returns true when it completed, false on scaledl::Error; aborts on
/// anything else.
template <class F>
bool guarded(F&& f) {
  try {
    f();
    return true;
  } catch (const scaledl::Error& e) {
    if (e.what()[0] == '\0') bug("scaledl::Error with an empty message");
    static const bool verbose = std::getenv("SCALEDL_FUZZ_VERBOSE") != nullptr;  // print each expected error
    if (verbose) std::fprintf(stderr, "fuzz: scaledl::Error: %s\n", e.what());
    return false;
  } catch (const std::exception& e) {
    bug("exception " + demangled(typeid(e)) + " escaped (not a scaledl::Error): " + e.what());
  } catch (...) {
    bug("a non-std exception escaped");
  }
}

/// A scratch directory of this process: $SCALEDL_FUZZ_TMP (scripts/fuzz.sh sets
/// it and removes it afterwards) or /dev/shm, then /tmp.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    namespace fs = std::filesystem;
    const char* env = std::getenv("SCALEDL_FUZZ_TMP");
    fs::path base =
        env && *env ? fs::path(env) : fs::path(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    fs::path d = base / ("scaledl-fuzz-" + std::to_string(getpid()));
    fs::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      scaledl::remove_tree(scratch(), ec);
    });
    return d;
  }();
  return dir;
}

/// Writes bytes to scratch()/name (creating parent folders); returns the path.
inline std::string write_file(const std::string& name, const void* data, size_t size) {
  const std::filesystem::path p = scratch() / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) bug("cannot write " + p.string());
  return p.string();
}
inline std::string write_file(const std::string& name, const std::string& text) {
  return write_file(name, text.data(), text.size());
}

/// scratch()/models -> the repository's models/ (configs that plans and spaces name).
inline void link_models() {
  namespace fs = std::filesystem;
  const fs::path link = scratch() / "work" / "models";
  if (fs::exists(link)) return;
  fs::create_directories(link.parent_path());
  fs::create_directory_symlink(fs::path(SCALEDL_SOURCE_DIR) / "models", link);
}

}  // namespace scaledl::fuzz
