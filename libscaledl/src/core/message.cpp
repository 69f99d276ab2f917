// The one-line form of an error message (message.hpp).
#include "scaledl/core/message.hpp"

#include <cmath>

#include <fmt/format.h>

namespace scaledl {

std::string first_line(const std::string& s) {
  const auto p = s.find('\n');
  return p == std::string::npos ? s : s.substr(0, p);
}

std::string one_line(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\n')
      o += "\\n";
    else if (c == '\r')
      o += "\\r";
    else if (c == '\t')
      o += "\\t";
    else if (c < 0x20 || c == 0x7f)
      o += fmt::format("\\x{:02x}", c);
    else
      o += static_cast<char>(c);
  }
  return o;
}

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  if (seconds < 59.95) return fmt::format("{:.1f} s", seconds);
  const long long s = std::llround(seconds);
  if (s < 3600) return fmt::format("{} min {} s", s / 60, s % 60);
  const long long min = std::llround(seconds / 60);
  if (min < 48 * 60) return fmt::format("{} h {} min", min / 60, min % 60);
  return fmt::format("{:.1f} days", seconds / 86400);
}

}  // namespace scaledl
