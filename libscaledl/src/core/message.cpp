// The one-line form of an error message (message.hpp).
#include "scaledl/core/message.hpp"

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

}  // namespace scaledl
