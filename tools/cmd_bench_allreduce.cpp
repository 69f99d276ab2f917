// scaledl bench allreduce: time collectives (all-reduce, all-gather,
// reduce-scatter, send/recv) through LibTorch's c10d process groups, on the
// ranks a launcher started (torchrun, srun, mpirun: MASTER_ADDR, MASTER_PORT,
// RANK, WORLD_SIZE) or on N local ranks this command starts itself (--world N).
// Rank 0 prints the table and writes the rows (docs/comm.md).
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "command.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/bench/collective_bench.hpp"
#include "scaledl/bench/probe.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/store.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct AllreduceOptions {
  std::string backend = "gloo";
  std::string collectives = "allreduce";
  std::string sizes = "1K..64M";
  std::string dtype = "fp32";
  int world = -1;   ///< >= 0 given: start this many local ranks (no launcher)
  int port = 0;     ///< --world: rendezvous port (0 = a free one)
  int threads = 1;  ///< compute threads per rank
  std::string db;   ///< store for the rows ("" = print only)
  std::string campaign = "default";
  std::string level;  ///< intra-node | inter-node ("" = from the node count)
  bool json = false;
  scaledl::CollectiveBenchOptions b;
};

/// A TCP port nobody listens on now (bind to 0, read it back, close).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  SCALEDL_CHECK(fd >= 0, "cannot open a socket to find a free port: {}", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  SCALEDL_CHECK(ok, "cannot find a free port on 127.0.0.1: {}", std::strerror(errno));
  return ntohs(a.sin_port);
}

/// True when something already listens on 127.0.0.1:port (or it cannot be bound).
bool port_taken(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return true;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool taken = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0;
  ::close(fd);
  return taken;
}

/// This process's argv (from /proc/self/cmdline) without "--world N" / "--world=N" / "--port P".
std::vector<std::string> child_args() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    argv.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--world" || a == "--port") {
      ++i;
      continue;
    }
    if (a.rfind("--world=", 0) == 0 || a.rfind("--port=", 0) == 0) continue;
    out.push_back(a);
  }
  return out;
}

/// The first "scaledl: error: " line of a rank's stderr, without the prefix.
std::string error_line(const fs::path& log) {
  std::ifstream f(log);
  std::string line;
  const std::string pre = "scaledl: error: ";
  while (std::getline(f, line))
    if (line.rfind(pre, 0) == 0) return line.substr(pre.size());
  return "";
}

/// --world N: starts N ranks of this same command over loopback and waits for
/// them. Rank 0's stdout is ours; each rank's stderr goes to a log whose first
/// error line becomes ours when a rank fails (the other ranks are then stopped).
int launch_local(const AllreduceOptions& o) {
  SCALEDL_CHECK(o.world >= 2, "--world={} must be >= 2 (a collective needs at least 2 ranks)", o.world);
  SCALEDL_CHECK(o.world <= 64, "--world={}: at most 64 local ranks", o.world);
  SCALEDL_CHECK(o.port >= 0 && o.port <= 65535, "--port={} is not a TCP port (1..65535, 0 = a free one)",
                o.port);
  if (o.port > 0)
    SCALEDL_CHECK(!port_taken(o.port), "--port={} is in use: choose another, or 0 for a free one", o.port);
  const int port = o.port > 0 ? o.port : free_port();
  const std::vector<std::string> args = child_args();
  const fs::path logs = fs::temp_directory_path() / fmt::format("scaledl-ranks-{}", ::getpid());
  fs::create_directories(logs);
  std::vector<pid_t> pids(o.world, -1);
  for (int r = 0; r < o.world; ++r) {
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      for (const char* k :
           {"MASTER_ADDR=", "MASTER_PORT=", "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE="})
        if (kv.rfind(k, 0) == 0) kv.clear();
      if (!kv.empty()) envs.push_back(kv);
    }
    envs.push_back("MASTER_ADDR=127.0.0.1");
    envs.push_back(fmt::format("MASTER_PORT={}", port));
    envs.push_back(fmt::format("RANK={}", r));
    envs.push_back(fmt::format("WORLD_SIZE={}", o.world));
    envs.push_back(fmt::format("LOCAL_RANK={}", r));
    envs.push_back(fmt::format("LOCAL_WORLD_SIZE={}", o.world));
    std::vector<char*> cargv, cenv;
    for (const auto& a : args) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string err = (logs / fmt::format("rank{}.err", r)).string();
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (r > 0) posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGTERM);
      scaledl::fail("--world={}: cannot start rank {}: {}", o.world, r, std::strerror(rc));
    }
    pids[r] = pid;
  }
  int left = o.world, failed = -1;
  while (left > 0) {
    int st = 0;
    pid_t p = ::waitpid(-1, &st, 0);
    if (p < 0) break;
    --left;
    for (int r = 0; r < o.world; ++r) {
      if (pids[r] != p) continue;
      pids[r] = -1;
      if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && failed < 0) {
        failed = r;
        for (pid_t q : pids)
          if (q > 0) ::kill(q, SIGTERM);  // the others would wait for it until their timeout
      }
    }
  }
  std::string msg;
  if (failed >= 0) {
    // Prefer rank 0's own error (it names the rendezvous), else the failed rank's.
    msg = error_line(logs / "rank0.err");
    if (msg.empty()) msg = error_line(logs / fmt::format("rank{}.err", failed));
    if (msg.empty()) msg = fmt::format("rank {} of {} ended without an error message", failed, o.world);
  }
  std::error_code ec;
  scaledl::remove_tree(logs, ec);
  if (failed >= 0) throw scaledl::Error(msg);
  return 0;
}

int run(const AllreduceOptions& o) {
  using namespace scaledl;
  bool launched = false;
  Rendezvous rv = rendezvous_from_env(&launched);
  if (o.world >= 0 || !launched) {
    SCALEDL_CHECK(!launched, "--world={}: this process already has RANK={} from a launcher; drop --world",
                  o.world, rv.rank);
    if (o.world < 0)
      fail(
          "no launcher environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): start ranks with "
          "torchrun/srun/"
          "mpirun, or give --world N to start N local ranks");
    return launch_local(o);
  }
  SCALEDL_CHECK(o.threads >= 1, "--threads={} must be >= 1", o.threads);
  set_compute_threads(o.threads);
  CollectiveBenchOptions b = o.b;
  b.backend = o.backend;
  b.dtype = parse_dtype(o.dtype, "--dtype");
  b.sizes = parse_size_range(o.sizes);
  b.collectives.clear();
  std::stringstream ss(o.collectives);
  for (std::string t; std::getline(ss, t, ',');) b.collectives.push_back(parse_collective(t));
  std::string level = o.level.empty() ? (rv.nodes() > 1 ? "inter-node" : "intra-node") : o.level;
  SCALEDL_CHECK(level == "intra-node" || level == "inter-node", "--level={} is not intra-node or inter-node",
                level);
  auto results = run_collective_bench(rv, b);
  if (rv.rank != 0) return 0;
  if (o.json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : results)
      a.push_back({{"collective", to_string(r.collective)},
                   {"bytes", r.bytes},
                   {"time_ms", r.stats.median_ms},
                   {"cv", r.stats.cv},
                   {"repeats", r.stats.n},
                   {"algbw_gbs", r.algbw_gbs},
                   {"busbw_gbs", r.busbw_gbs},
                   {"status", r.status},
                   {"reason", r.reason}});
    std::printf("%s\n", nlohmann::json{{"backend", o.backend},
                                       {"world", rv.world},
                                       {"nodes", rv.nodes()},
                                       {"level", level},
                                       {"results", a}}
                            .dump(1)
                            .c_str());
  } else {
    std::printf("%s on %d ranks (%d node%s, %s), %s\n", o.backend.c_str(), rv.world, rv.nodes(),
                rv.nodes() > 1 ? "s" : "", level.c_str(), o.dtype.c_str());
    std::printf("%-14s %14s %12s %8s %10s %10s  %s\n", "collective", "bytes", "time_us", "cv", "algbw_GB/s",
                "busbw_GB/s", "status");
    for (const auto& r : results)
      std::printf("%-14s %14.0f %12.1f %8.3f %10.3f %10.3f  %s%s%s\n", to_string(r.collective), r.bytes,
                  r.stats.median_ms * 1e3, r.stats.cv, r.algbw_gbs, r.busbw_gbs, r.status.c_str(),
                  r.reason.empty() ? "" : ": ", r.reason.c_str());
  }
  if (!o.db.empty()) {
    Store store(o.db);
    std::vector<CollectiveMeasurement> rows;
    for (const auto& r : results) {
      CollectiveMeasurement m;
      m.campaign = o.campaign;
      m.collective = to_string(r.collective);
      m.backend = o.backend;
      m.level = level;
      m.dtype = o.dtype;
      m.world = rv.world;
      m.nodes = rv.nodes();
      m.bytes = r.bytes;
      m.time_s = r.stats.median_ms / 1e3;
      m.busbw_gbs = r.busbw_gbs;
      m.cv = r.stats.cv;
      m.repeats = r.stats.n;
      m.status = r.status;
      m.source = "scaledl bench allreduce";
      rows.push_back(m);
    }
    const size_t added = store.put_collectives(rows);
    std::printf("%zu rows -> %s (%zu already there)\n", added, o.db.c_str(), rows.size() - added);
  }
  return 0;
}

scaledl::cli::Registrar reg(
    {"bench", "allreduce"},
    "Time collectives (all-reduce, all-gather, reduce-scatter, send/recv) on c10d process groups; --world N "
    "runs N "
    "local ranks",
    [](CLI::App& app) {
      auto o = std::make_shared<AllreduceOptions>();
      app.add_option("--backend", o->backend, "process-group backend: gloo (nccl, mpi: when compiled in)")
          ->capture_default_str();
      app.add_option("--collective", o->collectives,
                     "comma-separated: allreduce, allgather, reducescatter, sendrecv")
          ->capture_default_str();
      app.add_option("--sizes", o->sizes,
                     "message sizes: 1K..1G (powers of two) or a list 4K,1M (bytes, K/M/G binary)")
          ->capture_default_str();
      app.add_option("--dtype", o->dtype, "buffer element type: fp32, fp16, bf16")->capture_default_str();
      app.add_option("--world", o->world, "start this many local ranks over loopback (no launcher needed)");
      app.add_option("--port", o->port, "with --world: rendezvous port (default: a free one)");
      app.add_option("--timeout", o->b.timeout_s, "seconds to wait for every rank to join, and per operation")
          ->capture_default_str();
      app.add_option("--warmup", o->b.warmup, "untimed operations per size")->capture_default_str();
      app.add_option("--repeats", o->b.repeats, "timed operations per size (median reported)")
          ->capture_default_str();
      app.add_option("--max-seconds", o->b.max_seconds, "time budget per size")->capture_default_str();
      app.add_option("--threads", o->threads, "compute threads per rank")->capture_default_str();
      app.add_option("--db", o->db, "write the rows to this store (rank 0)");
      app.add_option("--campaign", o->campaign, "campaign name of the rows")->capture_default_str();
      app.add_option("--level", o->level,
                     "intra-node or inter-node (default: from the launcher's node count)");
      app.add_flag("--json", o->json, "print JSON");
      return [o] { return run(*o); };
    });

}  // namespace
