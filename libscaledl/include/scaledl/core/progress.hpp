#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// A one-line progress bar with ETA on stderr, drawn only when enabled (the CLI
// enables it when stderr is a terminal) so logs and pipes stay clean.
//
//   [#########.........]  52/150  35%  ok 48 skip 2 err 2  ETA 1m12s  linear:128x768x3072x1:fp32
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>

namespace scaledl {

class Progress {
 public:
  /// `total` items; draws nothing unless `enabled`.
  Progress(size_t total, bool enabled) : total_(total), enabled_(enabled), t0_(clock::now()) {}
  ~Progress() { finish(); }

  /// Item `done` (1-based) finished with `status` ("ok", "skip", "oom", ...).
  /// Skipped items do not count towards the rate used for the ETA.
  void update(size_t done, const std::string& status, const std::string& label) {
    ++counts_[status];
    if (status != "skip") ++worked_;
    done_ = done;
    if (!enabled_) return;
    double el = std::chrono::duration<double>(clock::now() - t0_).count();
    size_t left = total_ > done_ ? total_ - done_ : 0;
    double eta = worked_ > 0 ? el / static_cast<double>(worked_) * static_cast<double>(left) : 0;
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
    if (enabled_ && drawn_) {
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
  bool enabled_, drawn_ = false;
  clock::time_point t0_;
  std::map<std::string, size_t> counts_;
};

}  // namespace scaledl
