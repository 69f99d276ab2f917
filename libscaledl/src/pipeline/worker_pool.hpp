#pragma once
// Internal to the pipeline stages (src/pipeline, src/pipeline_text): the worker
// threads of `bench pipeline` and their timing (pipeline.hpp).
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scaledl/pipeline/pipeline.hpp"

namespace scaledl::pipeline_detail {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0);
/// Coefficient of variation (sample stddev / mean); 0 for fewer than 2 values.
double cv_of(const std::vector<double>& v);

/// One worker's pipeline: makes one sample per call, with its own state.
struct Worker {
  virtual ~Worker() = default;
  virtual void sample() = 0;
  double read_s = 0, decode_s = 0, transform_s = 0;  ///< stage seconds since the last reset
  int64_t bytes = 0;                                 ///< stored bytes consumed since the last reset
  int64_t count = 0;                                 ///< samples since the last reset
  void reset() { read_s = decode_s = transform_s = 0, bytes = count = 0; }
};

/// W = 1..o.max_workers: `make(W)` builds W workers (each with its shard); a
/// time-bounded warm-up per W sizes its runs, then o.repeats rounds, each running
/// every W once (interleaved), time a fixed number of samples per worker from a
/// common start to the last worker's end. Fills m.points and, from W = 1, the
/// per-sample stage times and bytes.
void measure_workers(const PipelineBenchOptions& o, PipelineMeasurement& m,
                     const std::function<std::vector<std::unique_ptr<Worker>>(int)>& make);

/// Throws Error naming the option when a field of `o` is out of range.
void check_options(const PipelineBenchOptions& o);

/// The whole file; throws Error("<key>=<path>: ...") when it cannot be read.
std::string read_file(const std::string& path, const std::string& key);

}  // namespace scaledl::pipeline_detail
