// `scaledl bench pipeline` (pipeline.hpp): W worker threads, each on its own
// shard, timed together; and the storage read rate of one file.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <thread>

#include "core/stats.hpp"
#include "pipeline/worker_pool.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/pipeline/pipeline.hpp"

namespace scaledl {

namespace pipeline_detail {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double cv_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return mean > 0 ? std::sqrt(ss / (v.size() - 1)) / mean : 0;
}

/// Runs `fn(w)` on W threads started together; returns the wall seconds from the
/// common start to the last thread's end (thread creation is outside the clock).
/// A worker's exception is rethrown here after all threads ended.
static double run_together(int W, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> th;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(W));
  th.reserve(static_cast<size_t>(W));
  for (int w = 0; w < W; ++w)
    th.emplace_back([&, w] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      try {
        fn(w);
      } catch (...) {
        errors[static_cast<size_t>(w)] = std::current_exception();
      }
    });
  while (ready.load() < W) std::this_thread::yield();
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& t : th) t.join();
  const double wall = seconds_since(t0);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return wall;
}

/// W = 1..max_workers: warm-up (time-bounded, also sizes the repeats), then
/// `repeats` runs of a fixed number of samples per worker.
/// CPU seconds so far: of the whole machine (busy jiffies of /proc/stat's "cpu"
/// line: all but idle and iowait) and of this process (getrusage).
struct CpuClock {
  double machine_s = 0, self_s = 0;
  bool ok = false;
  static CpuClock now() {
    CpuClock c;
    std::ifstream f("/proc/stat");
    std::string cpu;
    unsigned long long v[10] = {};
    if (f >> cpu && cpu == "cpu") {
      for (auto& x : v) f >> x;
      unsigned long long busy = 0;
      for (int i = 0; i < 10; ++i)
        if (i != 3 && i != 4 && i < 8) busy += v[i];  // user nice system [idle iowait] irq softirq steal
      c.machine_s = static_cast<double>(busy) / static_cast<double>(::sysconf(_SC_CLK_TCK));
      c.ok = true;
    }
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    c.self_s = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    return c;
  }
  /// vCPUs other processes kept busy between `a` and `b` over `wall` seconds.
  static double foreign(const CpuClock& a, const CpuClock& b, double wall) {
    if (!a.ok || !b.ok || wall <= 0) return 0;
    return std::max(0.0, ((b.machine_s - a.machine_s) - (b.self_s - a.self_s)) / wall);
  }
};

/// Every worker runs until `seconds` are up (at least one sample each); returns
/// samples per second per worker.
static double warm_up(std::vector<std::unique_ptr<Worker>>& ws, double seconds) {
  std::atomic<bool> stop{false};
  std::thread timer([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(seconds, 0.0)));
    stop.store(true);
  });
  double wall = 0;
  try {
    wall = run_together(static_cast<int>(ws.size()), [&](int w) {
      Worker& k = *ws[static_cast<size_t>(w)];
      do k.sample(), ++k.count;
      while (!stop.load(std::memory_order_relaxed));
    });
  } catch (...) {
    timer.join();
    throw;
  }
  timer.join();
  int64_t n = 0;
  for (auto& w : ws) n += w->count;
  for (auto& w : ws) w->reset();
  return static_cast<double>(n) / static_cast<double>(ws.size()) / std::max(wall, 1e-9);
}

void measure_workers(const PipelineBenchOptions& o, PipelineMeasurement& m,
                     const std::function<std::vector<std::unique_ptr<Worker>>(int)>& make) {
  const int maxw = o.max_workers;
  // Sizing: a full warm-up per W gives the samples per worker of one timed run.
  std::vector<int64_t> n(static_cast<size_t>(maxw) + 1, 4);
  for (int W = 1; W <= maxw; ++W) {
    auto ws = make(W);
    const double rate = warm_up(ws, o.warmup_s);
    n[static_cast<size_t>(W)] = std::max<int64_t>(4, static_cast<int64_t>(std::llround(rate * o.repeat_s)));
  }
  // Timed rounds, interleaved: round r runs W = 1, 2, ..., max, so a slow spell of
  // a shared machine falls on every W alike instead of on one W's every repeat.
  // Each run gets fresh workers (their own tokenizer or decoder, cold caches) and
  // a short warm-up first.
  std::vector<std::vector<double>> rates(static_cast<size_t>(maxw) + 1);
  std::vector<WorkerPoint> pts(static_cast<size_t>(maxw) + 1);
  std::vector<double> foreign(static_cast<size_t>(maxw) + 1, 0.0);
  double read_s = 0, decode_s = 0, transform_s = 0, bytes = 0, count = 0;
  for (int r = 0; r < o.repeats; ++r)
    for (int W = 1; W <= maxw; ++W) {
      auto ws = make(W);
      warm_up(ws, std::min(o.warmup_s, 0.25 * o.repeat_s));
      const int64_t k = n[static_cast<size_t>(W)];
      const CpuClock c0 = CpuClock::now();
      const double wall = run_together(W, [&](int w) {
        Worker& x = *ws[static_cast<size_t>(w)];
        for (int64_t i = 0; i < k; ++i) x.sample();
        x.count += k;
      });
      foreign[static_cast<size_t>(W)] += CpuClock::foreign(c0, CpuClock::now(), wall) / o.repeats;
      rates[static_cast<size_t>(W)].push_back(static_cast<double>(k * W) / wall);
      pts[static_cast<size_t>(W)].samples += k * W;
      if (W == 1) {  // the stage split of one worker (ORION's tau_disk, tau_decode, tau_cpu)
        read_s += ws[0]->read_s, decode_s += ws[0]->decode_s, transform_s += ws[0]->transform_s;
        bytes += static_cast<double>(ws[0]->bytes), count += static_cast<double>(ws[0]->count);
      }
    }
  for (int W = 1; W <= maxw; ++W) {
    WorkerPoint& pt = pts[static_cast<size_t>(W)];
    pt.workers = W;
    pt.repeats = o.repeats;
    pt.samples_per_s = median(rates[static_cast<size_t>(W)]);
    pt.cv = cv_of(rates[static_cast<size_t>(W)]);
    pt.foreign_vcpus = foreign[static_cast<size_t>(W)];
    pt.status = pt.foreign_vcpus > o.max_foreign ? "contended" : pt.cv > o.max_cv ? "unstable" : "ok";
    pt.runs = rates[static_cast<size_t>(W)];
    m.points.push_back(pt);
  }
  const double c = std::max(count, 1.0);
  m.read_ms = 1e3 * read_s / c;
  m.decode_ms = 1e3 * decode_s / c;
  m.transform_ms = 1e3 * transform_s / c;
  m.bytes_per_sample = bytes / c;
}

void check_options(const PipelineBenchOptions& o) {
  SCALEDL_CHECK(o.max_workers >= 1 && o.max_workers <= 256, "--workers={} must be in [1, 256]",
                o.max_workers);
  SCALEDL_CHECK(o.repeats >= 1 && o.repeats <= 1000, "--repeats={} must be in [1, 1000]", o.repeats);
  SCALEDL_CHECK(std::isfinite(o.warmup_s) && o.warmup_s >= 0 && o.warmup_s <= 3600,
                "--warmup-s={} must be in [0, 3600]", o.warmup_s);
  SCALEDL_CHECK(std::isfinite(o.repeat_s) && o.repeat_s > 0 && o.repeat_s <= 3600,
                "--repeat-s={} must be in (0, 3600]", o.repeat_s);
  SCALEDL_CHECK(std::isfinite(o.max_cv) && o.max_cv > 0, "--max-cv={} must be > 0", o.max_cv);
  SCALEDL_CHECK(std::isfinite(o.max_foreign) && o.max_foreign > 0, "--max-foreign={} must be > 0",
                o.max_foreign);
}

std::string read_file(const std::string& path, const std::string& key) {
  std::error_code ec;
  SCALEDL_CHECK(std::filesystem::is_regular_file(path, ec), "{}={}: no such file", key, path);
  std::ifstream f(path, std::ios::binary);
  SCALEDL_CHECK(f.good(), "{}={}: cannot open: {}", key, path, std::strerror(errno));
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace pipeline_detail

namespace {

using namespace pipeline_detail;

// ---- image -----------------------------------------------------------------------

/// Reads a whole file with POSIX calls into `buf` (reused); false on failure.
bool read_whole(const std::string& path, std::vector<uint8_t>& buf) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && st.st_size >= 0;
  if (ok) {
    buf.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (ok && got < buf.size()) {
      const ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
      if (r < 0 && errno == EINTR) continue;
      ok = r > 0;
      if (ok) got += static_cast<size_t>(r);
    }
  }
  ::close(fd);
  return ok;
}

struct ImageWorker : Worker {
  std::vector<std::string> files;  // this worker's shard
  size_t cursor = 0;
  int size;
  JpegDecoder dec;
  std::mt19937_64 rng;
  std::vector<uint8_t> raw;
  RgbImage img;
  std::vector<float> out;
  ImageWorker(std::vector<std::string> f, int s, uint64_t seed)
      : files(std::move(f)), size(s), rng(seed), out(static_cast<size_t>(3) * s * s) {}
  void sample() override {
    const std::string& path = files[cursor];
    cursor = (cursor + 1) % files.size();
    const auto t0 = Clock::now();
    SCALEDL_CHECK(read_whole(path, raw), "{}: cannot read: {}", path, std::strerror(errno));
    const auto t1 = Clock::now();
    std::string why;
    SCALEDL_CHECK(dec.decode(raw.data(), raw.size(), img, &why),
                  "{}: decoded in the validation pass, now: {}", path, why);
    const auto t2 = Clock::now();
    const CropBox box = random_resized_crop_box(img.width, img.height, rng);
    const bool flip = std::bernoulli_distribution(0.5)(rng);
    resize_flip_normalise(img, box, size, flip, out.data());
    const auto t3 = Clock::now();
    read_s += std::chrono::duration<double>(t1 - t0).count();
    decode_s += std::chrono::duration<double>(t2 - t1).count();
    transform_s += std::chrono::duration<double>(t3 - t2).count();
    bytes += static_cast<int64_t>(raw.size());
  }
};

}  // namespace

const char* to_string(InputKind k) {
  return k == InputKind::Text ? "text" : "image";
}

InputKind parse_input_kind(const std::string& s, const std::string& key) {
  if (s == "text") return InputKind::Text;
  if (s == "image") return InputKind::Image;
  fail("{}={} is not an input kind (text or image)", key, s);
}

std::string HostInfo::key() const {
  return fmt::format("{} ({} vCPUs)", cpu, vcpus);
}

HostInfo host_info() {
  HostInfo h;
  h.cpu = "unknown";
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    v.erase(v.find_last_not_of(" \t") + 1);
    if (!v.empty()) h.cpu = v;
    break;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  h.vcpus = sched_getaffinity(0, sizeof(set), &set) == 0
                ? CPU_COUNT(&set)
                : static_cast<int>(std::thread::hardware_concurrency());
  h.vcpus = std::max(h.vcpus, 1);
  return h;
}

PipelineMeasurement bench_image_pipeline(const PipelineBenchOptions& o) {
  check_options(o);
  SCALEDL_CHECK(o.image_size >= 8 && o.image_size <= 4096, "--image={} must be in [8, 4096]", o.image_size);
  std::error_code ec;
  SCALEDL_CHECK(std::filesystem::is_directory(o.images, ec), "--images={}: no such folder", o.images);
  std::vector<std::string> all;
  for (const auto& e : std::filesystem::directory_iterator(o.images, ec)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (e.is_regular_file(ec) && (ext == ".jpg" || ext == ".jpeg")) all.push_back(e.path().string());
  }
  SCALEDL_CHECK(!ec, "--images={}: cannot list: {}", o.images, ec.message());
  std::sort(all.begin(), all.end());
  SCALEDL_CHECK(!all.empty(), "--images={}: no *.jpg or *.jpeg file", o.images);
  // Validation pass: a corrupt JPEG is skipped and counted here, never timed.
  PipelineMeasurement m;
  m.kind = InputKind::Image;
  m.sample_size = o.image_size;
  m.data = o.images;
  std::vector<std::string> good;
  {
    JpegDecoder dec;
    std::vector<uint8_t> raw;
    RgbImage img;
    for (const auto& p : all) {
      std::string why;
      if (!read_whole(p, raw)) {
        why = std::string("cannot read: ") + std::strerror(errno);
      } else if (dec.decode(raw.data(), raw.size(), img, &why)) {
        good.push_back(p);
        continue;
      }
      ++m.skipped;
      m.skipped_files.push_back(std::filesystem::path(p).filename().string() + ": " + why);
    }
  }
  SCALEDL_CHECK(!good.empty(), "--images={}: no decodable JPEG ({} corrupt, e.g. {})", o.images, m.skipped,
                m.skipped_files.front());
  SCALEDL_CHECK(static_cast<int64_t>(good.size()) >= o.max_workers,
                "--images={}: {} decodable JPEGs cannot give --workers={} workers a shard each", o.images,
                good.size(), o.max_workers);
  m.items = static_cast<int64_t>(good.size());
  measure_workers(o, m, [&](int W) {
    // Round-robin shards (DistributedSampler-style), each cycled like epochs.
    std::vector<std::unique_ptr<Worker>> ws;
    for (int w = 0; w < W; ++w) {
      std::vector<std::string> shard;
      for (size_t i = static_cast<size_t>(w); i < good.size(); i += static_cast<size_t>(W))
        shard.push_back(good[i]);
      ws.push_back(
          std::make_unique<ImageWorker>(std::move(shard), static_cast<int>(o.image_size), o.seed + w));
    }
    return ws;
  });
  return m;
}

StorageMeasurement measure_storage_read(const std::string& path, int repeats, double max_bytes,
                                        const std::string& key) {
  SCALEDL_CHECK(repeats >= 1 && repeats <= 100, "--read-repeats={} must be in [1, 100]", repeats);
  SCALEDL_CHECK(max_bytes >= 4096, "--read-max-bytes={} must be >= 4096", max_bytes);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SCALEDL_CHECK(fd >= 0, "{}={}: cannot open: {}", key, path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  SCALEDL_CHECK(::fstat(fd, &st) == 0, "{}={}: cannot stat: {}", key, path, std::strerror(errno));
  SCALEDL_CHECK(S_ISREG(st.st_mode), "{}={}: not a regular file (the read rate is of one dataset file)", key,
                path);
  SCALEDL_CHECK(st.st_size > 0, "{}={}: the file is empty", key, path);
  const size_t total = static_cast<size_t>(std::min<double>(static_cast<double>(st.st_size), max_bytes));
  // A first byte proves the file readable (a folder or a file without read
  // permission for root cannot get here; an I/O error can).
  char probe;
  SCALEDL_CHECK(::pread(fd, &probe, 1, 0) == 1, "{}={}: cannot read: {}", key, path, std::strerror(errno));

  StorageMeasurement s;
  s.path = path;
  s.bytes = static_cast<double>(total);
  s.repeats = repeats;
  s.cache_dropped = true;
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<char> buf(size_t{1} << 20);
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    s.cache_dropped = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 && s.cache_dropped;
    // How much of the file is still cached (mincore on a read-only mapping).
    void* map = ::mmap(nullptr, total, PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) {
      std::vector<unsigned char> vec((total + page - 1) / page);
      if (::mincore(map, total, vec.data()) == 0) {
        const size_t resident =
            static_cast<size_t>(std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return c & 1; }));
        s.resident_before = std::max(s.resident_before, static_cast<double>(resident) / vec.size());
      }
      ::munmap(map, total);
    }
    const auto t0 = Clock::now();
    size_t done = 0;
    while (done < total) {
      const ssize_t n = ::pread(fd, buf.data(), std::min(buf.size(), total - done), static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      SCALEDL_CHECK(n > 0, "{}={}: read failed at byte {}: {}", key, path, done,
                    n < 0 ? std::strerror(errno) : "end of file");
      done += static_cast<size_t>(n);
    }
    rates.push_back(static_cast<double>(total) / std::max(seconds_since(t0), 1e-9));
  }
  s.read_Bps = median(rates);
  s.cv = cv_of(rates);
  s.runs = rates;
  return s;
}

}  // namespace scaledl
