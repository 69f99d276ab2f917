#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Collective microbenchmarks on LibTorch's c10d process groups (issue #14):
// all-reduce, all-gather, reduce-scatter and point-to-point send/recv, timed
// the way NVIDIA's nccl-tests time them, so the two kinds of rows share one
// meaning (docs/comm.md):
//   bytes  = nccl-tests' "size": the all-reduce / send buffer; the gathered
//            (all-gather) or scattered (reduce-scatter) whole, N x the per-rank part;
//   time   = the slowest rank's time of one operation (max over ranks), median
//            over the repeats;
//   algbw  = bytes / time;  busbw = algbw x 2(N-1)/N (all-reduce),
//            x (N-1)/N (all-gather, reduce-scatter), x 1 (send/recv).
//
// Ranks rendezvous as torchrun and srun launch them: MASTER_ADDR, MASTER_PORT,
// RANK, WORLD_SIZE (and LOCAL_RANK, LOCAL_WORLD_SIZE), through a c10d TCPStore
// served by rank 0, with a timeout: a rank that never joins is an error after
// `timeout_s`, not a hang.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scaledl/io/store.hpp"
#include "scaledl/ir/layer_types.hpp"

namespace scaledl {

/// Where this process sits in the job, from the launcher's environment.
struct Rendezvous {
  std::string master_addr = "127.0.0.1";
  int port = 29500;
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;  ///< ranks on this node (LOCAL_WORLD_SIZE, else SLURM_NTASKS_PER_NODE, else world)
  int nodes() const { return local_world > 0 ? (world + local_world - 1) / local_world : 1; }
};

/// Reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
/// (falling back to SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and to Open MPI's
/// OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE). Throws an Error
/// naming the variable and value when one is malformed or out of range
/// (rank outside [0, world), world < 1, port outside [1, 65535]).
/// `found` is set to whether a launcher's rank variable was present.
Rendezvous rendezvous_from_env(bool* found = nullptr);

enum class Collective : int { AllReduce = 0, AllGather, ReduceScatter, SendRecv };
const char* to_string(Collective c);
/// "allreduce", "allgather", "reducescatter", "sendrecv" (also nccl-tests'
/// "all_reduce" ... spellings); anything else is an Error naming `key`.
Collective parse_collective(const std::string& s, const std::string& key = "--collective");

/// Bus-bandwidth factor of nccl-tests: busbw = algbw x factor(N).
double busbw_factor(Collective c, int world);

/// "1K..1G" (powers of two from 1 KiB to 1 GiB), "4M" or "1K,64K,1M"; K/M/G are
/// binary (KiB, MiB, GiB). Throws naming `key` on a bad or empty range.
std::vector<double> parse_size_range(const std::string& spec, const std::string& key = "--sizes");

/// Process-group backends this build can run ("gloo" when LibTorch was built
/// with it and its headers were found; "nccl", "mpi" never in Debian's LibTorch).
std::vector<std::string> compiled_backends();

struct CollectiveBenchOptions {
  std::string backend = "gloo";
  std::vector<Collective> collectives = {Collective::AllReduce};
  std::vector<double> sizes = {};  ///< bytes, see the header comment
  DType dtype = DType::FP32;
  int warmup = 3;           ///< untimed operations per size, >= 0
  int repeats = 10;         ///< timed operations per size, >= 1
  double timeout_s = 60;    ///< rendezvous and per-operation timeout, > 0
  double max_seconds = 30;  ///< stop repeating a size after this long (>= 1 repeat), > 0
};

/// One timed (collective, size) on this job.
struct CollectiveResult {
  Collective collective = Collective::AllReduce;
  double bytes = 0;
  TimingStats stats;     ///< per operation, ms (max over ranks per repeat)
  double algbw_gbs = 0;  ///< bytes / median time, GB/s (1e9)
  double busbw_gbs = 0;
  std::string status = "ok";  ///< ok | unstable | unsupported | error
  std::string reason;
};

/// Joins the job described by `rv` (every rank must call it with the same
/// options), runs every collective at every size and returns the results on
/// every rank. Throws Error on a bad option, an unknown or not compiled-in
/// backend, a port that cannot be served, or a rendezvous timeout.
std::vector<CollectiveResult> run_collective_bench(const Rendezvous& rv, const CollectiveBenchOptions& opt);

}  // namespace scaledl
