#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The one-line form of an error message, as `scaledl` prints it after "scaledl: error: " and the
// Python module raises it (scaledl.Error): the same text from both. And a duration in words.
#include <string>

namespace scaledl {

/// The first line of `s` (a library's multi-line exception text, e.g. LibTorch's).
std::string first_line(const std::string& s);
/// `s` as one line: newline, carriage return and tab as \n, \r, \t, other control characters
/// as \xNN (a newline in a path or a CSV cell must not break the one error line).
std::string one_line(const std::string& s);

/// A duration for people: "42.5 s", "12 min 5 s", "3 h 12 min", "4.2 days" (seconds >= 0; NaN or
/// infinity as "-").
std::string human_duration(double seconds);

}  // namespace scaledl
