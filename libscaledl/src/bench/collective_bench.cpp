// Collective microbenchmarks on c10d process groups (collective_bench.hpp, docs/comm.md).
// Gloo is the backend Debian's LibTorch ships (ProcessGroupGloo, with the gloo
// headers of libgloo-dev); NCCL and MPI are not compiled into it, and a LibTorch
// 2.x from PyTorch is not asked for them here either: `compiled_backends()` says
// what this build can run.
#include "scaledl/bench/collective_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <torch/torch.h>

#ifdef SCALEDL_HAVE_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO \
  1  // the header's guard: LibTorch was built with Gloo (CMake checked its symbols' headers)
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

#include "scaledl/core/error.hpp"

namespace scaledl {

namespace {

const char* env(const char* k) {
  const char* v = std::getenv(k);
  return v && *v ? v : nullptr;
}

/// First of `keys` set in the environment, parsed as an integer in [lo, hi].
int int_env(std::initializer_list<const char*> keys, int lo, int hi, int def, bool* present = nullptr) {
  for (const char* k : keys) {
    const char* v = env(k);
    if (!v) continue;
    char* end = nullptr;
    errno = 0;
    long x = std::strtol(v, &end, 10);
    SCALEDL_CHECK(errno == 0 && end != v && *end == '\0' && x >= lo && x <= hi,
                  "environment {}=\"{}\" is not an integer in [{}, {}]", k, v, lo, hi);
    if (present) *present = true;
    return static_cast<int>(x);
  }
  return def;
}

std::string first_line(const std::string& s) {
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

Rendezvous rendezvous_from_env(bool* found) {
  Rendezvous r;
  bool has_rank = false;
  if (const char* a = env("MASTER_ADDR")) r.master_addr = a;
  r.port = int_env({"MASTER_PORT"}, 1, 65535, 29500);
  r.world = int_env({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}, 1, 1 << 20, 1);
  r.rank = int_env({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}, 0, 1 << 20, 0, &has_rank);
  SCALEDL_CHECK(r.rank < r.world, "environment RANK={} must be < WORLD_SIZE={}", r.rank, r.world);
  r.local_world = int_env({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 1, r.world, r.world);
  r.local_rank = int_env({"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}, 0, r.local_world - 1,
                         r.rank % r.local_world);
  if (found) *found = has_rank;
  return r;
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "allreduce";
    case Collective::AllGather:
      return "allgather";
    case Collective::ReduceScatter:
      return "reducescatter";
    case Collective::SendRecv:
      return "sendrecv";
  }
  return "?";
}

Collective parse_collective(const std::string& s, const std::string& key) {
  std::string t;
  for (char c : s)
    if (c != '_' && c != '-') t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "allreduce") return Collective::AllReduce;
  if (t == "allgather") return Collective::AllGather;
  if (t == "reducescatter") return Collective::ReduceScatter;
  if (t == "sendrecv" || t == "p2p") return Collective::SendRecv;
  fail("{}=\"{}\" is not a collective (allreduce, allgather, reducescatter, sendrecv)", key, s);
}

double busbw_factor(Collective c, int world) {
  const double n = world;
  switch (c) {
    case Collective::AllReduce:
      return 2 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
      return (n - 1) / n;
    case Collective::SendRecv:
      return 1;
  }
  return 1;
}

std::vector<double> parse_size_range(const std::string& spec, const std::string& key) {
  auto one = [&](const std::string& t) {
    SCALEDL_CHECK(!t.empty(), "{}=\"{}\": empty size", key, spec);
    size_t pos = 0;
    double v = 0;
    try {
      v = std::stod(t, &pos);
    } catch (const std::exception&) {
      fail("{}=\"{}\": \"{}\" is not a size (e.g. 64K, 1M, 1G)", key, spec, t);
    }
    std::string unit = t.substr(pos);
    double mult = 1;
    if (unit == "K" || unit == "k" || unit == "KiB")
      mult = 1024;
    else if (unit == "M" || unit == "MiB")
      mult = 1024.0 * 1024;
    else if (unit == "G" || unit == "GiB")
      mult = 1024.0 * 1024 * 1024;
    else if (!unit.empty() && unit != "B")
      fail("{}=\"{}\": unit \"{}\" is not B, K, M or G", key, spec, unit);
    v *= mult;
    SCALEDL_CHECK(std::isfinite(v) && v >= 4 && v <= 64.0 * 1024 * 1024 * 1024,
                  "{}=\"{}\": {} is outside [4 B, 64 GiB]", key, spec, t);
    return std::floor(v);
  };
  std::vector<double> out;
  const auto dots = spec.find("..");
  if (dots != std::string::npos) {
    double lo = one(spec.substr(0, dots)), hi = one(spec.substr(dots + 2));
    SCALEDL_CHECK(lo <= hi, "{}=\"{}\": the range is empty (start > end)", key, spec);
    for (double s = lo; s <= hi * (1 + 1e-12); s *= 2) out.push_back(s);
  } else {
    std::stringstream ss(spec);
    std::string t;
    while (std::getline(ss, t, ',')) out.push_back(one(t));
  }
  SCALEDL_CHECK(!out.empty(), "{}=\"{}\" gives no size", key, spec);
  return out;
}

std::vector<std::string> compiled_backends() {
#ifdef SCALEDL_HAVE_GLOO
  return {"gloo"};
#else
  return {};
#endif
}

namespace {

// run_collective_bench's steps: check the options, meet the other ranks (a
// TCP store, then a Gloo process group on it), then time each collective at
// each size.

void check_bench_options(const Rendezvous& rv, const CollectiveBenchOptions& opt) {
  SCALEDL_CHECK(opt.backend == "gloo" || opt.backend == "nccl" || opt.backend == "mpi",
                "--backend={} is not a backend (gloo, nccl, mpi)", opt.backend);
  const auto have = compiled_backends();
  SCALEDL_CHECK(std::find(have.begin(), have.end(), opt.backend) != have.end(),
                "--backend={} is not compiled into this build's LibTorch (compiled in: {})", opt.backend,
                have.empty() ? std::string("none") : have.front());
  SCALEDL_CHECK(!opt.sizes.empty(), "--sizes gives no message size");
  SCALEDL_CHECK(!opt.collectives.empty(), "--collective gives no collective");
  SCALEDL_CHECK(opt.warmup >= 0, "--warmup={} must be >= 0", opt.warmup);
  SCALEDL_CHECK(opt.repeats >= 1, "--repeats={} must be >= 1", opt.repeats);
  SCALEDL_CHECK(opt.timeout_s > 0 && opt.timeout_s <= 86400, "--timeout={} must be in (0, 86400] seconds",
                opt.timeout_s);
  SCALEDL_CHECK(opt.max_seconds > 0, "--max-seconds={} must be > 0", opt.max_seconds);
  SCALEDL_CHECK(rv.world >= 2,
                "WORLD_SIZE={}: a collective needs at least 2 ranks (--world N starts N local ranks)",
                rv.world);
  SCALEDL_CHECK(opt.dtype == DType::FP32 || opt.dtype == DType::FP16 || opt.dtype == DType::BF16,
                "--dtype={}: collectives run on fp32, fp16 or bf16 buffers", to_string(opt.dtype));
}

#ifdef SCALEDL_HAVE_GLOO

using Gloo = c10d::ProcessGroupGloo;

[[noreturn]] void rendezvous_timed_out(const std::string& where, const Rendezvous& rv,
                                       const CollectiveBenchOptions& opt) {
  fail(
      "rendezvous at {} timed out after {} s: not all WORLD_SIZE={} ranks joined (every rank needs the "
      "same MASTER_ADDR, MASTER_PORT and WORLD_SIZE and a distinct RANK)",
      where, opt.timeout_s, rv.world);
}

/// The TCP store at MASTER_ADDR:MASTER_PORT (rank 0 serves it) once all ranks joined.
c10::intrusive_ptr<c10d::Store> join_store(const Rendezvous& rv, const CollectiveBenchOptions& opt,
                                           std::chrono::milliseconds timeout, const std::string& where) {
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(rv.port);
    so.isServer = rv.rank == 0;
    so.numWorkers = static_cast<std::size_t>(rv.world);
    so.waitWorkers = true;
    so.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(rv.master_addr, so);
  } catch (const std::exception& e) {
    const std::string m = e.what();
    if (contains(m, "already in use") || contains(m, "EADDRINUSE"))
      fail(
          "MASTER_PORT={} on {} is in use (another job, or a rank of an earlier run, holds it): choose "
          "another port",
          rv.port, rv.master_addr);
    if (contains(m, "imed out") || contains(m, "timeout") || contains(m, "Timeout"))
      rendezvous_timed_out(where, rv, opt);
    fail("rendezvous at {} failed on rank {}: {}", where, rv.rank, first_line(m));
  }
}

/// The Gloo process group of all ranks, on GLOO_SOCKET_IFNAME, loopback or the default device.
c10::intrusive_ptr<Gloo> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store, const Rendezvous& rv,
                                         const CollectiveBenchOptions& opt, std::chrono::milliseconds timeout,
                                         const std::string& where) {
  try {
    auto o = Gloo::Options::create(timeout);
    o->threads = 1;  // one worker thread per rank: operations are issued one at a time
    if (const char* ifname = env("GLOO_SOCKET_IFNAME"))
      o->devices.push_back(Gloo::createDeviceForInterface(ifname));
    else if (rv.master_addr == "127.0.0.1" || rv.master_addr == "localhost")
      o->devices.push_back(Gloo::createDeviceForHostname("127.0.0.1"));
    else
      o->devices.push_back(Gloo::createDefaultDevice());
    return c10::make_intrusive<Gloo>(store, rv.rank, rv.world, o);
  } catch (const std::exception& e) {
    const std::string m = e.what();
    if (contains(m, "imeout") || contains(m, "imed out"))  // the ranks meet through the store here
      rendezvous_timed_out(where, rv, opt);
    fail("gloo process group on rank {} of {} ({}): {}", rv.rank, rv.world, where, first_line(m));
  }
}

/// Element-wise maximum of `v` over all ranks.
std::vector<double> reduce_max(Gloo& pg, std::vector<double> v) {
  auto t = torch::tensor(v, torch::kFloat64);
  std::vector<at::Tensor> tv{t};
  c10d::AllreduceOptions ao;
  ao.reduceOp = c10d::ReduceOp::MAX;
  pg.allreduce(tv, ao)->wait();
  std::vector<double> out(v.size());
  auto acc = t.accessor<double, 1>();
  for (size_t i = 0; i < v.size(); ++i) out[i] = acc[static_cast<int64_t>(i)];
  return out;
}

/// One collective on buffers of `part` elements (per rank, per piece for all-gather
/// and reduce-scatter); send/recv passes to the next rank and hears from the previous one.
struct CollectiveOp {
  Gloo& pg;
  Collective c;
  int rank, world;
  std::vector<at::Tensor> a, b;
  std::vector<std::vector<at::Tensor>> many;

  CollectiveOp(Gloo& g, Collective col, int r, int w, int64_t part, c10::ScalarType tdt)
      : pg(g), c(col), rank(r), world(w), a{torch::ones({part}, tdt)}, b{torch::zeros({part}, tdt)}, many(1) {
    for (int i = 0; i < w; ++i) many[0].push_back(torch::ones({part}, tdt));
  }

  void operator()() {
    switch (c) {
      case Collective::AllReduce:
        pg.allreduce(a)->wait();
        break;
      case Collective::AllGather:
        pg.allgather(many, a)->wait();
        break;
      case Collective::ReduceScatter:
        pg.reduce_scatter(b, many)->wait();
        break;
      case Collective::SendRecv: {
        auto ws = pg.send(a, (rank + 1) % world, 0);
        auto wr = pg.recv(b, (rank + world - 1) % world, 0);
        ws->wait();
        wr->wait();
        break;
      }
    }
  }
};

/// Warm-up, then blocks of back-to-back operations: r's stats, bandwidths and status.
void time_collective(Gloo& pg, CollectiveOp& op, const CollectiveBenchOptions& opt, CollectiveResult* r) {
  using Clock = std::chrono::steady_clock;
  // As nccl-tests: a block of `iters` back-to-back operations after a barrier,
  // timed as a whole, per operation = block / iters (a barrier per operation
  // would add the ranks' release skew to every sample).
  auto timed = [&](int iters) {
    pg.barrier()->wait();
    auto t0 = Clock::now();
    for (int k = 0; k < iters; ++k) op();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / iters;
  };
  for (int i = 0; i < opt.warmup; ++i) op();
  // One operation sets the block length (>= ~5 ms) and how many blocks fit in
  // max_seconds; every rank uses the slowest rank's estimate, so all agree.
  const double est = std::max(reduce_max(pg, {timed(1)})[0], 1e-6);
  const int iters = std::clamp(static_cast<int>(std::ceil(5.0 / est)), 1, 1000);
  const int n = std::clamp(static_cast<int>(opt.max_seconds * 1000 / (est * iters)), 1, opt.repeats);
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) ms.push_back(timed(iters));
  ms = reduce_max(pg, ms);  // the slowest rank of each block
  r->stats = TimingStats::from_samples(ms);
  const double s = r->stats.median_ms / 1e3;
  r->algbw_gbs = s > 0 ? r->bytes / s / 1e9 : 0;
  r->busbw_gbs = r->algbw_gbs * busbw_factor(op.c, op.world);
  if (r->stats.n >= 3 && r->stats.cv > 0.25) {
    r->status = "unstable";
    r->reason = fmt::format("cv={:.3f} over {} repeats", r->stats.cv, r->stats.n);
  }
}

/// Collective `c` at about `size` bytes; "unsupported" when the backend lacks it.
CollectiveResult bench_one(Gloo& pg, const Rendezvous& rv, const CollectiveBenchOptions& opt, Collective c,
                           double size) {
  const auto tdt = opt.dtype == DType::FP16   ? torch::kFloat16
                   : opt.dtype == DType::BF16 ? torch::kBFloat16
                                              : torch::kFloat32;
  const int64_t e = dtype_bytes(opt.dtype);
  const int W = rv.world;
  CollectiveResult r;
  r.collective = c;
  const bool split = c == Collective::AllGather || c == Collective::ReduceScatter;
  const int64_t part = std::max<int64_t>(1, static_cast<int64_t>(size) / e / (split ? W : 1));
  r.bytes = static_cast<double>(part * e * (split ? W : 1));  // what actually moves (rounded to elements)
  CollectiveOp op(pg, c, rv.rank, W, part, tdt);
  try {
    time_collective(pg, op, opt, &r);
  } catch (const c10::Error& err) {
    const std::string m = err.what_without_backtrace();
    // A collective this backend does not implement fails the same way on every rank.
    if (contains(m, "does not support") || contains(m, "not supported")) {
      r.status = "unsupported";
      r.reason = fmt::format("{} {}", opt.backend, first_line(m));
    } else {
      fail("{} of {} bytes failed on rank {} of {}: {}", to_string(c), r.bytes, rv.rank, W, first_line(m));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& err) {  // gloo transport errors (a peer died, a timeout)
    fail("{} of {} bytes failed on rank {} of {}: {}", to_string(c), r.bytes, rv.rank, W,
         first_line(err.what()));
  }
  return r;
}

#endif  // SCALEDL_HAVE_GLOO

}  // namespace

std::vector<CollectiveResult> run_collective_bench(const Rendezvous& rv, const CollectiveBenchOptions& opt) {
  check_bench_options(rv, opt);
  std::vector<CollectiveResult> results;
#ifdef SCALEDL_HAVE_GLOO
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(opt.timeout_s * 1000));
  const std::string where = fmt::format("{}:{}", rv.master_addr, rv.port);
  const c10::intrusive_ptr<c10d::Store> store = join_store(rv, opt, timeout, where);
  const c10::intrusive_ptr<Gloo> pg = make_gloo_group(store, rv, opt, timeout, where);
  for (Collective c : opt.collectives) {
    for (double size : opt.sizes) {
      results.push_back(bench_one(*pg, rv, opt, c, size));
      if (results.back().status == "unsupported") break;  // the other sizes would fail alike
    }
  }
  pg->barrier()->wait();
#else
  (void)rv;
#endif
  return results;
}

}  // namespace scaledl
