#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Measured collectives (issue #14): importing NVIDIA nccl-tests output into the
// store's `collectives` table, fitting the closed forms of comm.hpp to each
// group of rows, and plotting measured against modelled times (docs/comm.md).
//
// Row meaning (as `scaledl bench allreduce` writes them, collective_bench.hpp):
//   bytes  = nccl-tests' "size" column: the all-reduce / send buffer, the
//            gathered (all-gather) or scattered (reduce-scatter) whole;
//   time_s = one operation, seconds (nccl-tests prints microseconds, vTrain's
//            tables nanoseconds);
//   busbw  = nccl-tests' bus bandwidth, GB/s (1e9 bytes/s).
// No LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/comm/comm.hpp"
#include "scaledl/io/store.hpp"

namespace scaledl {

/// "allreduce" | "allgather" | "reducescatter" | "sendrecv" from those names or
/// nccl-tests' ("all_reduce", "all_reduce_perf", "AllReduce", "p2p"); anything
/// else is an Error naming `key` and the value.
std::string canonical_collective(const std::string& s, const std::string& key = "--collective");

/// What a file does not say about its rows (scaledl import nccl-tests).
struct NcclTestsImportOptions {
  std::string campaign = "default";  ///< campaign of the rows, non-empty
  std::string collective;  ///< "" = from the file (test banner, then file name); else must agree with it
  int64_t world = 0;       ///< ranks, >= 2; 0 = from the file ("#  Rank" lines, nThread x nGpus, AR_GPU<N>)
  int64_t nodes = 0;       ///< nodes, >= 1; 0 = distinct hosts of the "#  Rank" lines, else 1
  std::string level;       ///< intra-node | inter-node; "" = inter-node when nodes > 1
  std::string device;      ///< device of the rows; "" = "cuda:<GPU name>" of rank 0's line, else ""
  std::string backend = "nccl-tests";  ///< the tool that measured: nccl-tests (NCCL underneath)
  /// Throws naming the option and value (--world=0, --level=x, --collective=x).
  void validate() const;
};

/// Rows a file's own bandwidth columns contradict (issue #39 case 10): refused,
/// not imported.
struct NcclTestsRefused {
  size_t rows = 0;  ///< halves refused (out-of-place and in-place counted apart)
  std::vector<std::string>
      notes;  ///< one line per file with refusals: "FILE: K of M rows refused: ..., e.g. line L: ..."
};

/// Parses one file: the text output of nccl-tests (all_reduce_perf, all_gather_perf,
/// reduce_scatter_perf, sendrecv_perf) or vTrain's CSV table (header
/// "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)"), told apart by
/// the first line. Each data row gives two rows, out-of-place and in-place.
/// Rows of size 0 carry no bandwidth and are skipped. Each half's time is
/// cross-checked against the row's own bandwidth columns (algbw = size / time;
/// busbw = algbw x comm_factors().a, where the file states the collective and
/// world, and in vTrain tables): a contradicting half is refused and counted in
/// `refused` (when given); a file with every half refused is an Error naming the
/// first. Throws Error("FILE:LINE: ...")
/// naming the line and the bad field on the first malformed line, and
/// Error("FILE: ...") when the file cannot be read, holds no data rows, or does
/// not say what the options must then say (world, collective).
std::vector<CollectiveMeasurement> parse_nccl_tests_file(const std::string& path,
                                                         const NcclTestsImportOptions& o,
                                                         NcclTestsRefused* refused = nullptr);
/// Same on text already read; `name` is the path for messages and for what the
/// file name says (AR_GPU<N>, all_gather_perf, ...).
std::vector<CollectiveMeasurement> parse_nccl_tests_text(const std::string& text, const std::string& name,
                                                         const NcclTestsImportOptions& o,
                                                         NcclTestsRefused* refused = nullptr);

struct CollectiveImportSummary {
  size_t files = 0;
  size_t rows = 0;           ///< parsed (out-of-place + in-place)
  size_t inserted = 0;       ///< new in the store (rows - inserted were there already)
  NcclTestsRefused refused;  ///< rows refused: their time contradicts their file's bandwidth columns
  nlohmann::json to_json() const;
};

/// Parses every file first, then opens (creating if needed) the store at `db`
/// and inserts all rows in one transaction; rows already present are skipped.
/// Any error: the store is not opened, or not changed.
CollectiveImportSummary import_nccl_tests(const std::vector<std::string>& files,
                                          const NcclTestsImportOptions& o, const std::string& db);

/// The fit of one group: rows of equal (campaign, device, collective, backend,
/// level, nodes) and one world size N (dtype and in-place/out-of-place rows
/// are pooled), or, with world = 0, the joint fit of one (B, gamma) to every
/// world size of that family.
///
/// Within one N the ring and tree forms are the same straight line in S (c(N)
/// is a constant): they fit equally well and their gammas differ by the factor
/// c_ring(N) / c_tree(N). Only the joint fit over several N tells the forms apart.
struct CollectiveGroupFit {
  std::string campaign, device, collective, backend, level;
  int64_t world = 0;  ///< ranks N; 0 = joint fit over `worlds`
  int64_t nodes = 1;
  std::vector<int64_t> worlds;          ///< the world sizes fitted ({world} for one N)
  double min_bytes = 0, max_bytes = 0;  ///< message sizes fitted, bytes
  size_t sizes = 0;                     ///< distinct message sizes
  std::optional<CommFit> ring;          ///< ring form (comm_factors)
  std::optional<CommFit> tree;          ///< tree form, allreduce only
  std::string skipped;                  ///< why there is no fit ("" = fitted)
  /// "ring" or "tree": the form with the smaller MRE in a joint fit; "same" for
  /// one N with both forms (see above); "ring" when only the ring form applies.
  std::string best() const;
  /// {campaign, device, collective, backend, level, world, worlds, nodes, samples,
  ///  sizes, min_bytes, max_bytes, ring: {bandwidth_Bps, busbw_gbs, gamma_s, mre,
  ///  max_rel}, tree: {...}, best} or {..., skipped}.
  nlohmann::json to_json() const;
};

/// Groups ok rows (world >= 2) and fits each group with fit_comm (relative
/// residuals, gamma >= 0); then, for every family with fits at two or more
/// world sizes, the joint fit (world = 0) over their rows. A group with fewer
/// than 2 distinct sizes is returned with `skipped` set instead of failing the
/// others; a fit whose B or gamma is implausible (check_comm_plausible) is an
/// Error naming the group and the file its rows came from. Ordered by campaign, device, collective, backend,
/// level, nodes, world, each family's joint fit after its world sizes.
std::vector<CollectiveGroupFit> fit_collectives(const std::vector<CollectiveMeasurement>& rows);

/// The calibration file of `scaledl comm fit --out`: {"bandwidth_Bps", "gamma_s"}
/// of the ring all-reduce fit of the largest world (one N, not a joint fit; more
/// samples on a tie),
/// which load_comm_model reads (eq. 15), "nodes" that group was measured on, plus
/// "source" naming that group and
/// "fits": every group's to_json(). Without an all-reduce fit the two top-level
/// keys are absent (and load_comm_model would refuse the file).
nlohmann::json comm_fit_json(const std::vector<CollectiveGroupFit>& fits);

/// Writes DIR/<collective>-<campaign>.{dat,svg.gp,svg} per (campaign, collective):
/// measured time (points) and the ring model (lines) over message size, log-log,
/// one colour per world size (and nodes, backend, device when those vary);
/// joint fits are not drawn.
/// Measured points are thinned to about 40 per decade of size. Runs gnuplot;
/// returns the SVG paths.
std::vector<std::string> plot_collective_fits(const std::vector<CollectiveMeasurement>& rows,
                                              const std::vector<CollectiveGroupFit>& fits,
                                              const std::string& dir);

}  // namespace scaledl
