#pragma once
// Checks every CLI11 app of ScaleDL adds: the `scaledl` tool (main.cpp) and the Python module,
// which parses its keyword arguments with the same flag definitions (python/src/module.cpp).
#include <cerrno>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace scaledl::cli {

/// Every integer option of `app` and its subcommands refuses a value beyond the integer range
/// instead of taking the range's end (CLI11 2.1 converts with strtoll, which clamps).
inline void refuse_integer_overflow(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type != "INT" && type != "UINT") continue;
    const bool is_signed = type == "INT";
    opt->check(CLI::Validator(
        [is_signed](std::string& v) -> std::string {
          errno = 0;
          char* end = nullptr;
          if (is_signed)
            (void)std::strtoll(v.c_str(), &end, 0);
          else
            (void)std::strtoull(v.c_str(), &end, 0);
          if (errno == ERANGE)
            return fmt::format("{} is beyond the integer range (at most {})", v,
                               is_signed ? "9223372036854775807" : "18446744073709551615");
          return std::string();
        },
        "", "no overflow"));
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_integer_overflow(*sub);
}

}  // namespace scaledl::cli
