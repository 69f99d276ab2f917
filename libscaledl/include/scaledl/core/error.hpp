#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// One exception type for every user-facing failure, and one check macro.
//
// The message is a single line that names the offending key and value and, where
// possible, what to do about it, e.g.
//   config.num_attention_heads=12 does not divide config.hidden_size=1000
// The CLI prints it as "scaledl: error: <message>" and exits with status 1.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace scaledl {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/// Throws scaledl::Error with a formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace scaledl

/// SCALEDL_CHECK(cond, "fmt {}", args...): throws scaledl::Error(fmt) when !cond.
#define SCALEDL_CHECK(cond, ...)               \
  do {                                         \
    if (!(cond)) ::scaledl::fail(__VA_ARGS__); \
  } while (0)
