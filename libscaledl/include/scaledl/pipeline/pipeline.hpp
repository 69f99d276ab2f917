#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The host input pipeline (issue #15; ORION, ../shared/seeds/orion.md §3.3-3.4;
// docs/pipeline.md): measure what the CPUs of this machine can feed to the
// accelerators, model it against the number of worker threads, and bound the
// iteration time by it.
//
//   measure  `scaledl bench pipeline`: W = 1..max_workers std::threads, each running
//            a real pipeline on its own shard of the committed data
//            (datasets/pipeline/): text = SentencePiece tokenisation + packing
//            into samples of `tokens_per_sample` ids; image = file read +
//            TurboJPEG decode + random-resized-crop + horizontal flip +
//            normalise into [3, size, size] floats; plus the storage read rate of
//            one file after dropping it from the page cache.
//   model    ORION's CPU term as an inverse Universal Scalability Law:
//              R(W) = W R1 / (1 + alpha (W-1) + beta W (W-1)),  W <= vCPUs
//            (R1 = samples/s of one worker, alpha, beta fitted to the measured
//            W >= 2 points), capped by storage: min(R(W), B_disk / bytes per sample).
//   bound    T_input = samples per iteration / R;  T_iter = max(T_compute, T_input)
//            (ORION eq. tau_step), with the bottleneck named.
//
// No LibTorch here: the per-image transforms are hand-written loops (docs/pipeline.md
// says why), so this stage builds like io and design. The text pipeline
// (SentencePiece) is in text_pipeline.hpp, a library of its own.
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace scaledl {

class Store;

enum class InputKind : int { Text = 0, Image };
const char* to_string(InputKind k);
/// "text" | "image"; anything else is an Error naming `key` and the value.
InputKind parse_input_kind(const std::string& s, const std::string& key = "--input");

// ---- image: TurboJPEG + hand-written transforms -----------------------------------

/// 8-bit RGB pixels, [height, width, 3] row-major (HWC).
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
};

/// One worker's JPEG decoder (a TurboJPEG handle; not shared between threads).
class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
  /// Decodes a JPEG (tjDecompressHeader3 + tjDecompress2 into RGB, accurate
  /// DCT, stop on the first warning). False, with `why` set, for a corrupt one
  /// (truncated, not a JPEG, absurd size): the caller skips and counts it.
  bool decode(const uint8_t* data, size_t size, RgbImage& out, std::string* why = nullptr);

 private:
  void* handle_ = nullptr;
};

/// A crop of an image, pixels: x, y of the top-left corner, w x h.
struct CropBox {
  int x = 0, y = 0, w = 0, h = 0;
};

/// torchvision's RandomResizedCrop box: an area fraction uniform in
/// [scale_lo, scale_hi] of the image and an aspect ratio log-uniform in
/// [ratio_lo, ratio_hi]; 10 tries, then the centred crop of the clamped ratio.
CropBox random_resized_crop_box(int width, int height, std::mt19937_64& rng, double scale_lo = 0.08,
                                double scale_hi = 1.0, double ratio_lo = 3.0 / 4.0,
                                double ratio_hi = 4.0 / 3.0);

/// ImageNet's per-channel mean and standard deviation (of x / 255), RGB.
constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};

/// The crop `box` of `img` resized bilinearly (pixel centres, as
/// torchvision's antialias=False) to size x size, mirrored left-right when
/// `flip`, and normalised ((x / 255 - mean) / std) in one pass into `out`:
/// [3, size, size] floats, CHW. `out` must hold 3 * size * size floats.
void resize_flip_normalise(const RgbImage& img, const CropBox& box, int size, bool flip, float* out);

// ---- the benchmark -----------------------------------------------------------------

/// Where the measurements were taken.
struct HostInfo {
  std::string cpu;  ///< /proc/cpuinfo "model name" (else "unknown")
  int vcpus = 1;    ///< CPUs this process may run on (sched_getaffinity)
  /// "AMD EPYC (2 vCPUs)": the host key of store rows.
  std::string key() const;
};
HostInfo host_info();

struct PipelineBenchOptions {
  std::string corpus;               ///< text: UTF-8 corpus, one line a piece of text
  std::string tokenizer;            ///< text: SentencePiece .model
  std::string images;               ///< image: folder of *.jpg / *.jpeg
  int max_workers = 2;              ///< measure W = 1..max_workers worker threads, in [1, 256]
  int64_t tokens_per_sample = 512;  ///< text: token ids per sample, in [1, 1048576]
  int64_t image_size = 224;         ///< image: output side, pixels, in [8, 4096]
  double warmup_s = 0.2;            ///< untimed run of each W that sizes its timed runs (and, capped at
                                    ///< repeat_s / 4, before every timed run), seconds, >= 0
  int repeats = 5;                  ///< timed runs per W, in [1, 1000]; round r runs every W once
  double repeat_s = 0.4;            ///< target length of one timed run, seconds, > 0
  uint64_t seed = 0;                ///< crop and flip randomness (worker w draws from seed + w)
  double max_cv = 0.05;             ///< samples/s CV above this marks the W "unstable"
  double max_foreign = 0.2;  ///< other processes' CPU use above this many vCPUs marks the W "contended"
};

/// Throughput of W workers.
struct WorkerPoint {
  int workers = 1;
  double samples_per_s = 0;  ///< median over the repeats of (samples of all workers / wall seconds)
  double cv = 0;             ///< coefficient of variation of the repeats' samples/s
  int repeats = 0;
  int64_t samples = 0;        ///< samples in the timed repeats
  double foreign_vcpus = 0;   ///< mean vCPUs other processes kept busy during the timed runs (/proc/stat
                              ///< busy time less this process's CPU time): a shared machine's interference
  std::string status = "ok";  ///< ok | unstable (cv > max_cv) | contended (foreign_vcpus > max_foreign):
                              ///< do not trust the point
  std::vector<double> runs;   ///< samples/s of each timed run, in the order they ran
};

/// One pipeline kind measured for W = 1..max_workers.
struct PipelineMeasurement {
  InputKind kind = InputKind::Text;
  int64_t sample_size = 0;      ///< tokens per sample (text) or output side in pixels (image)
  double bytes_per_sample = 0;  ///< stored bytes one sample reads: corpus bytes per sample / mean JPEG size
  double read_ms = 0;           ///< W = 1, per sample: reading the file (page cache); 0 for text (in memory)
  double decode_ms = 0;         ///< W = 1, per sample: JPEG decode / SentencePiece encode (ORION tau_decode)
  double transform_ms = 0;  ///< W = 1, per sample: crop + resize + flip + normalise / packing (ORION tau_cpu)
  int64_t items = 0;        ///< usable images or lines in the set
  int64_t skipped = 0;      ///< corrupt JPEGs skipped (found by the validation pass, never timed)
  std::vector<std::string> skipped_files;  ///< "name: why"
  std::string data;                        ///< the corpus file or the image folder
  std::vector<WorkerPoint> points;         ///< W = 1, 2, ...
};

/// Sequential read rate of one file from storage.
struct StorageMeasurement {
  std::string path;
  double bytes = 0;     ///< bytes read per repeat (the file, at most max_bytes)
  double read_Bps = 0;  ///< median bytes / s over the repeats
  double cv = 0;
  int repeats = 0;
  bool cache_dropped = false;  ///< posix_fadvise(POSIX_FADV_DONTNEED) succeeded before every read
  double resident_before = 0;  ///< largest fraction of the file's pages in the page cache just before a
                               ///< read (mincore); near 0 = a read from the device, near 1 = from memory
  std::vector<double> runs;    ///< bytes / s of each read, in order
};

/// (The text pipeline's benchmark is in text_pipeline.hpp: SentencePiece cannot
/// share a process with LibTorch, see there.)
/// The image pipeline for W = 1..max_workers. Every JPEG is decoded once first:
/// a corrupt one is skipped and counted (never an error); a folder with no
/// decodable JPEG is an Error naming --images.
PipelineMeasurement bench_image_pipeline(const PipelineBenchOptions& o);
/// Reads `path` sequentially in 1 MiB blocks (at most `max_bytes`), `repeats`
/// times, each after posix_fadvise(DONTNEED). Throws Error("<key>=<path>: ...")
/// when it cannot be opened, is not a regular file or is empty.
StorageMeasurement measure_storage_read(const std::string& path, int repeats = 3,
                                        double max_bytes = 1073741824.0, const std::string& key = "--path");

// ---- the throughput model (ORION §3.3) ---------------------------------------------

/// Samples/s of the input pipeline against workers, vCPUs and sample size.
struct ThroughputModel {
  InputKind kind = InputKind::Text;
  int64_t sample_size = 0;  ///< at which it was measured (tokens or pixels)
  double r1 = 0;            ///< samples/s of one worker
  double alpha = 0;         ///< USL contention, in [0, 1]
  double beta = 0;          ///< USL coherency, >= 0 (0 unless >= 3 worker counts were measured)
  double fixed_ms =
      0;  ///< per-sample time that does not grow with the sample's output size (image: read + decode)
  double scaled_ms =
      0;  ///< per-sample time that does (image: transform, x pixels; text: all of it, x tokens)
  double bytes_per_sample = 0;   ///< stored bytes per sample at sample_size
  double read_Bps = 0;           ///< storage read rate; 0 = not measured (no cap)
  int measured_vcpus = 1;        ///< vCPUs of the host it was measured on
  int max_measured_workers = 1;  ///< the largest W measured
  std::string host;              ///< HostInfo::key() of that host
  std::string source;            ///< file it was loaded from

  /// Fits R1 (the W = 1 median), alpha and beta (least squares of the
  /// linearised USL, W R1 / R(W) - 1 = alpha (W-1) + beta W (W-1), over the
  /// W >= 2 points; alpha clamped to [0, 1], beta to >= 0). Throws without a W = 1 point.
  static ThroughputModel fit(const PipelineMeasurement& m, const StorageMeasurement* storage,
                             const HostInfo& host);
  /// samples/s of the CPU side: USL at min(workers, vcpus), rescaled to `sample_size`.
  double cpu_rate(int64_t workers, int64_t vcpus, int64_t sample_size) const;
  /// samples/s storage can deliver at `sample_size` (infinity when not measured).
  double storage_rate(int64_t sample_size) const;
  nlohmann::json to_json() const;
};

/// The input side of one host.
struct InputPrediction {
  int64_t workers = 1;
  int64_t vcpus = 1;
  int64_t sample_size = 0;
  double cpu_samples_per_s = 0;
  double storage_samples_per_s = 0;  ///< infinity without a storage measurement
  double samples_per_s = 0;          ///< min of the two
  std::string limit;                 ///< "cpu" | "storage"
  bool extrapolated = false;         ///< min(workers, vcpus) beyond the largest W measured
};
/// Throws Error naming --workers / --vcpus when < 1 (or > 4096), --seq / --image when sample_size < 1.
InputPrediction predict_input(const ThroughputModel& m, int64_t workers, int64_t vcpus, int64_t sample_size);

/// The input side's uncertainty as an interval around T_input (ms) at `level` 0.80 or 0.95:
/// T_input x/÷ (1 + e), e = 0.115 at 80 % (the largest mean |error| of the rate's checks on a
/// quiet VM, docs/pipeline.md) and 0.33 at 95 % (the checks on a VM that slowed down meanwhile).
/// An input-bound T_iter = max(T_compute, T_input) takes its interval from both sides' quantiles.
std::pair<double, double> input_interval_ms(double t_input_ms, double level);

/// ORION's tau_step = max(tau_gpu, tau_pipeline): the input pipeline overlaps the
/// accelerator (prefetching), so the slower side sets the pace.
struct IterationBound {
  double t_compute_ms = 0;
  double t_input_ms = 0;        ///< samples_per_iter / samples_per_s
  double samples_per_iter = 0;  ///< samples one host prepares per iteration
  double t_iter_ms = 0;         ///< max of the two
  std::string bottleneck;       ///< "compute" | "input"
  nlohmann::json to_json() const;
};
IterationBound bound_iteration(double t_compute_ms, double samples_per_iter, const InputPrediction& in);

// ---- results: JSON (`--out`) and the store (`--db`) --------------------------------

struct PipelineReport {
  HostInfo host;
  std::vector<PipelineMeasurement> pipelines;
  std::optional<StorageMeasurement> storage;
  nlohmann::json options;  ///< the bench options, for the record
  /// {"format": "scaledl-pipeline", "version": 1, host, pipelines (each with its
  /// fitted "model" and "predicted" samples/s per W), storage}.
  nlohmann::json to_json() const;
  /// Validates every field; throws Error("<where>: key=value ...").
  static PipelineReport from_json(const nlohmann::json& j, const std::string& where);
};

/// The model of one kind from a `bench pipeline --out` JSON, a hand-written
/// description of the same layout, or a store with pipeline rows (one host).
/// Throws Error naming `key`=path when it holds no measurement of `kind`.
ThroughputModel load_throughput_model(const std::string& path, InputKind kind,
                                      const std::string& key = "--pipeline");

/// Writes the report's rows into the store's `pipeline` table (schema 3; one
/// row per kind and W, one per storage file); rows whose (campaign, host, kind,
/// sample_size, workers, data) are already there are kept. Returns rows inserted.
size_t put_pipeline_rows(Store& store, const std::string& campaign, const PipelineReport& r);
/// The report stored for (campaign, host); "" matches all (one host only).
PipelineReport pipeline_rows(Store& store, const std::string& campaign = "", const std::string& host = "");

}  // namespace scaledl
