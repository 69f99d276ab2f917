#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Progress on stderr: a one-line bar with ETA redrawn in place on a terminal, or, when stderr is
// a log or a pipe, a plain line at most every `interval` seconds (and the last one), so a long
// command in a batch job is never silent and its log holds no carriage returns.
//
//   [#########.........]  52/150  35%  ok 48 skip 2 err 2  ETA 1m12s  linear:128x768x3072x1:fp32
//   progress: 52/150 (35 %) ok 48 skip 2 err 2, ETA 1m12s: linear:128x768x3072x1:fp32
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>

namespace scaledl {

enum class ProgressMode { Off, Bar, Lines };

class Progress {
 public:
  /// `total` items; draws a bar when `enabled`, nothing otherwise.
  Progress(size_t total, bool enabled)
      : total_(total), mode_(enabled ? ProgressMode::Bar : ProgressMode::Off), t0_(clock::now()) {}
  /// `total` items in `mode`; Lines prints at most one line per `interval_s` seconds.
  Progress(size_t total, ProgressMode mode, double interval_s = 10)
      : total_(total), mode_(mode), interval_s_(interval_s), t0_(clock::now()) {}
  ~Progress() { finish(); }

  /// Item `done` (1-based) finished with `status` ("ok", "skip", "oom", ...).
  /// Skipped items do not count towards the rate used for the ETA.
  void update(size_t done, const std::string& status, const std::string& label) {
    ++counts_[status];
    if (status != "skip") ++worked_;
    done_ = done;
    if (mode_ == ProgressMode::Off) return;
    double el = std::chrono::duration<double>(clock::now() - t0_).count();
    size_t left = total_ > done_ ? total_ - done_ : 0;
    double eta = worked_ > 0 ? el / static_cast<double>(worked_) * static_cast<double>(left) : 0;
    if (mode_ == ProgressMode::Lines) {
      if (el - last_line_s_ < interval_s_ && done_ < total_) return;
      last_line_s_ = el;
      std::string st;
      for (const auto& kv : counts_) st += fmt::format(" {} {}", kv.first, kv.second);
      std::fprintf(stderr, "progress: %zu/%zu (%d %%)%s, %s elapsed, ETA %s: %s\n", done_, total_,
                   total_ ? static_cast<int>(100 * done_ / total_) : 100, st.c_str(), format_secs(el).c_str(),
                   format_secs(eta).c_str(), label.c_str());
      std::fflush(stderr);
      return;
    }
    const int width = 24;
    int filled = total_ ? static_cast<int>(width * done_ / total_) : width;
    std::string bar(static_cast<size_t>(filled), '#');
    bar += std::string(static_cast<size_t>(width - filled), '.');
    std::string st;
    for (const auto& kv : counts_) st += fmt::format(" {} {}", kv.first, kv.second);
    std::string lab = label.size() > 40 ? label.substr(0, 37) + "..." : label;
    std::fprintf(stderr, "\r[%s] %zu/%zu %3d%% %s  ETA %s  %-40s", bar.c_str(), done_, total_,
                 total_ ? static_cast<int>(100 * done_ / total_) : 100, st.c_str(), format_secs(eta).c_str(),
                 lab.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
  /// Ends the line (idempotent).
  void finish() {
    if (mode_ == ProgressMode::Bar && drawn_) {
      std::fputc('\n', stderr);
      drawn_ = false;
    }
  }
  static std::string format_secs(double s) {
    if (s < 60) return fmt::format("{:.0f}s", s);
    if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
    return fmt::format("{}h{:02d}m", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
  }

 private:
  using clock = std::chrono::steady_clock;
  size_t total_, done_ = 0, worked_ = 0;
  ProgressMode mode_;
  double interval_s_ = 10, last_line_s_ = -1e9;
  bool drawn_ = false;
  clock::time_point t0_;
  std::map<std::string, size_t> counts_;
};

}  // namespace scaledl
