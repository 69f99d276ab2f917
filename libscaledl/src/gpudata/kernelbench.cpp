// KernelBench importer (gpudata.hpp; sources and mappings: docs/gpu-data.md).
//
// ScalingIntelligence/KernelBench times the PyTorch reference of each level-1 problem (one
// small nn.Module per operator) in eager mode, FP32, forward under torch.no_grad(), with CUDA
// events: 3 warm-ups, then the mean and std of 100 trials (eager_ms, eager_std_ms). The
// folder (datasets/gpus/kernelbench/README.md, or the shared copy's README) holds:
//   level1_eager_compile.csv   one row per (eager run, problem): gpu_hardware (the per-row
//                              torch.cuda.get_device_name), timing_dir, eager_timing_commit
//                              (12 hex), problem_set_id, problem_id, problem_name, eager_ms,
//                              eager_std_ms (+ flag, when present: a non-empty flag refuses
//                              the row with the flag as the reason)
//   level1_problem_shapes.csv  the shapes: problem_set_id, problem_id, problem_name,
//                              constants_json (the module-level constants, evaluated)
//   runs_index.csv             per (timing_dir, config, timing_commit): the torch pin of
//                              requirements.txt at the commit and whether its timing code
//                              flushes L2 before every trial (the Provenance of each run)
// Timings are joined to shapes on (problem_set_id, problem_id): KernelBench enlarged most
// problems in 2025-07, so the same problem id has other shapes in other problem sets.
//
// The mapping is kProblems below: one row per problem that becomes a layer row of ours, with
// each dim of the layer type a product of constants (or a literal). Every other problem is
// skipped under its name (convolutions, pooling, reductions, other norms, losses but
// cross-entropy, scans, matmuls with diagonal / triangular / einsum structure, and these near
// misses:
//   11_4D_tensor_matrix_multiplication   torch.einsum: not checked to run as one GEMM;
//   12/14/15 diagonal, triangular        a diag() or triu()/tril() around the GEMM;
//   16_/18_Matmul_with_transposed_A/both A^T: the layout of a weight gradient, not of a
//                                        linear forward;
//   20, 21, 27-32 unary activations      no layer type of ours (only tanh is ours: pointwise
//                                        saves=1); 30 Softsign is three eager kernels anyway;
//   24_LogSoftmax                        not our softmax;
//   25_Swish                             x * sigmoid(x): two eager kernels, not F.silu;
//   33-35, 37-39 other norms             no layer type of ours;
//   87_conv_pointwise_2D                 a convolution: cuDNN may use TF32 (on by default);
//   88_MinGPTNewGelu                     the tanh GELU written out: seven eager kernels;
//   97_ScaledDotProductAttention         fused SDPA (FP16 inputs in ps3-ps6); ours is the
//                                        unfused eager core with dropout.)
//
// One row per (layer, dims, GPU): the same shape on the same GPU timed by several runs (and,
// for the plain A.B matmuls, several problems: 1 and 13 are both torch.matmul of two dense
// N x N matrices) is stored once, with the median of those means (n = their count; cv the
// larger of their spread and their median within-run cv). Where one shape was timed both as
// A.B^T (17: nn.Linear's own y = x W^T, what `scaledl bench layers` times) and as A.B (2), the
// A.B^T timings give the row (the layout changes cuBLAS's kernel: up to 40 % on the L40S) and
// the A.B ones are counted as skipped. Each single timing is checked (implausible_layer_row)
// before it is pooled: a bad one is refused and counted, and does not enter the median.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "gpudata/csv_table.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "scaledl/learn/neusight.hpp"  // parse_csv, csv_column

namespace scaledl {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRepository = "ScalingIntelligence/KernelBench";
constexpr const char* kEagerFile = "level1_eager_compile.csv";
constexpr const char* kShapesFile = "level1_problem_shapes.csv";
constexpr const char* kRunsFile = "runs_index.csv";
constexpr int kTrials = 100;  ///< trials per KernelBench timing (after 3 warm-ups)

/// A level-1 problem that is a layer of ours. `dims` gives each dim of layer_info(type).dims
/// as a product of the problem's constants and integer literals ("batch_size*dim", "0").
/// `rank`: where one (shape, GPU) is timed by problems of several ranks, only the lowest
/// rank's timings give the row (0: nn.Linear's own layout; 1: everything else).
struct ProblemMap {
  const char* name;  ///< problem_name, as in every problem set
  LayerType type = LayerType::Linear;
  std::vector<const char*> dims;
  int rank;
};

// clang-format off
const std::vector<ProblemMap> kProblems = {
  // torch.matmul(A[M,K], B[K,N]): a linear of tokens M, d_in K, d_out N, no bias
  {"1_Square_matrix_multiplication_",        LayerType::Linear,    {"N", "N", "N", "0"}, 1},
  {"2_Standard_matrix_multiplication_",      LayerType::Linear,    {"M", "K", "N", "0"}, 1},
  {"6_Matmul_with_large_K_dimension_",       LayerType::Linear,    {"M", "K", "N", "0"}, 1},
  {"7_Matmul_with_small_K_dimension_",       LayerType::Linear,    {"M", "K", "N", "0"}, 1},
  {"8_Matmul_with_irregular_shapes_",        LayerType::Linear,    {"M", "K", "N", "0"}, 1},
  // A[M,N] . B[N,M] -> [M,M]: the reduced dim is N
  {"9_Tall_skinny_matrix_multiplication_",   LayerType::Linear,    {"M", "N", "M", "0"}, 1},
  // dense N x N operands whose values happen to be symmetric: the same GEMM as problem 1
  {"13_Matmul_for_symmetric_matrices",       LayerType::Linear,    {"N", "N", "N", "0"}, 1},
  // A[M,K] . x[K,1]: a linear with one output feature (cuBLAS runs it as a GEMV, as it would nn.Linear's)
  {"4_Matrix_vector_multiplication_",        LayerType::Linear,    {"M", "K", "1", "0"}, 1},
  // torch.matmul(A[N,M,K], B[K,L]) folds A's leading dims into rows: one mm of [N*M,K] x [K,L],
  // as nn.Linear does for [batch, seq, hidden]
  {"10_3D_tensor_matrix_multiplication",     LayerType::Linear,    {"N*M", "K", "L", "0"}, 1},
  // torch.matmul(A[M,K], B[N,K].T): nn.Linear's forward y = x W^T (B.T is a view: a cuBLAS transpose flag)
  {"17_Matmul_with_transposed_B",            LayerType::Linear,    {"M", "K", "N", "0"}, 0},
  // torch.bmm(A[b,m,k], B[b,k,n]): our bmm [batch, m, n] x [batch, n, k] reduces its n
  {"3_Batched_matrix_multiplication",        LayerType::BMM,       {"batch_size", "m", "k", "n"}, 1},
  // A * s (a Python float): one tensor and a scalar
  {"5_Matrix_scalar_multiplication",         LayerType::Pointwise, {"M*N", "0"}, 1},
  // torch.tanh: what our pointwise bench times with saves=1
  {"22_Tanh",                                LayerType::Pointwise, {"batch_size*dim", "1"}, 1},
  {"19_ReLU",                                LayerType::ReLU,      {"batch_size*dim"}, 1},
  // F.gelu (erf form, as torch::gelu)
  {"26_GELU_",                               LayerType::GELU,      {"batch_size*dim"}, 1},
  // torch.softmax(x[batch_size, dim], dim=1): the last dim
  {"23_Softmax",                             LayerType::Softmax,   {"batch_size", "dim"}, 1},
  // nn.LayerNorm((features, dim1, dim2)) of x[batch_size, features, dim1, dim2]: affine, over
  // the normalised numel
  {"40_LayerNorm",                           LayerType::LayerNorm, {"batch_size", "features*dim1*dim2"}, 1},
  // x / sqrt(mean(x^2, dim=1) + eps) of x[batch_size, features, dim1, dim2]: RMS over the
  // features of each (batch, dim1, dim2) position, written out in eager ops as our rmsnorm
  // bench writes it (that one over the last dim, with a weight)
  {"36_RMSNorm_",                            LayerType::RMSNorm,   {"batch_size*dim1*dim2", "features"}, 1},
  // F.cross_entropy(logits[batch_size, num_classes], targets[batch_size]), mean reduction
  {"95_CrossEntropyLoss",                    LayerType::CrossEntropy, {"batch_size", "num_classes"}, 1},
};
// clang-format on

const ProblemMap* find_problem(const std::string& name) {
  for (const auto& p : kProblems)
    if (name == p.name) return &p;
  return nullptr;
}

using gpudata::Table;

/// One CSV of the folder (Table checks the header and every record's field count).
Table read_csv(const fs::path& p) {
  SCALEDL_CHECK(fs::is_regular_file(p), "{}: no such file (a KernelBench folder holds {}, {} and {})",
                p.string(), kEagerFile, kShapesFile, kRunsFile);
  return Table(p.string());
}

double parse_number(const std::string& s, const std::string& where, const char* col) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  SCALEDL_CHECK(!s.empty() && end && *end == '\0', "{}: {}=\"{}\" is not a number", where, col, s);
  return v;
}

int64_t parse_int(const std::string& s, const std::string& where, const char* col) {
  const double v = parse_number(s, where, col);
  SCALEDL_CHECK(v >= 1 && v < 1e12 && v == std::floor(v), "{}: {}=\"{}\" is not a positive integer", where,
                col, s);
  return static_cast<int64_t>(v);
}

/// One eager run: a timing file of `timing_dir` at a commit (runs_index.csv, config eager).
struct RunInfo {
  std::string commit;       ///< full hash
  std::string torch_pin;    ///< "torch==2.5.0", "torch==2.9.*", "torch" (unpinned), "" (none)
  bool flushes_l2 = false;  ///< the timing code at the commit flushes L2 before every trial
};

/// (timing_dir, first 12 hex of the commit) -> run.
std::map<std::pair<std::string, std::string>, RunInfo> read_runs(const Table& t) {
  const int c_dir = t.need("timing_dir"), c_cfg = t.need("config"), c_commit = t.need("timing_commit"),
            c_pin = t.need("torch_pin_in_requirements_at_commit"),
            c_flush = t.need("timing_code_flushes_l2_at_commit");
  std::map<std::pair<std::string, std::string>, RunInfo> runs;
  for (size_t r = 1; r < t.recs.size(); ++r) {
    const auto& f = t.recs[r];
    if (f[c_cfg] != "eager") continue;
    const std::string& commit = f[c_commit];
    SCALEDL_CHECK(commit.size() >= 12 && commit.find_first_not_of("0123456789abcdef") == std::string::npos,
                  "{}: timing_commit=\"{}\" is not a git commit hash", t.where(r), commit);
    const std::string& flush = f[c_flush];
    SCALEDL_CHECK(flush == "yes" || flush == "no",
                  "{}: timing_code_flushes_l2_at_commit=\"{}\" is not yes or no", t.where(r), flush);
    runs[{f[c_dir], commit.substr(0, 12)}] = RunInfo{commit, f[c_pin], flush == "yes"};
  }
  return runs;
}

/// One problem of one problem set.
struct Shape {
  std::string name;
  nlohmann::json constants;  ///< object
  std::string where;         ///< file:line of its row
};

/// (problem_set_id, problem_id) -> shape.
std::map<std::pair<std::string, int64_t>, Shape> read_shapes(const Table& t) {
  const int c_ps = t.need("problem_set_id"), c_id = t.need("problem_id"), c_name = t.need("problem_name"),
            c_const = t.need("constants_json");
  std::map<std::pair<std::string, int64_t>, Shape> shapes;
  for (size_t r = 1; r < t.recs.size(); ++r) {
    const auto& f = t.recs[r];
    const std::string where = t.where(r);
    const int64_t id = parse_int(f[c_id], where, "problem_id");
    nlohmann::json c;
    try {
      c = nlohmann::json::parse(f[c_const]);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: constants_json=\"{}\" is not JSON ({})", where, f[c_const], e.what());
    }
    SCALEDL_CHECK(c.is_object(), "{}: constants_json=\"{}\" is not a JSON object", where, f[c_const]);
    const bool fresh =
        shapes.emplace(std::make_pair(f[c_ps], id), Shape{f[c_name], std::move(c), where}).second;
    SCALEDL_CHECK(fresh, "{}: problem ({}, {}) is listed twice", where, f[c_ps], id);
  }
  return shapes;
}

/// The dims of `p` from the constants of `s` (Error naming the shapes file:line when a
/// constant is missing or not a positive integer).
std::vector<int64_t> problem_dims(const ProblemMap& p, const Shape& s) {
  const LayerInfo& info = layer_info(p.type);
  SCALEDL_CHECK(p.dims.size() == info.dims.size(), "kernelbench mapping of {}: {} dims for {} ({})", p.name,
                p.dims.size(), info.name, info.dims.size());
  std::vector<int64_t> dims;
  for (size_t i = 0; i < p.dims.size(); ++i) {
    const std::string expr = p.dims[i];
    double v = 1;
    size_t at = 0;
    while (at <= expr.size()) {
      const size_t star = std::min(expr.find('*', at), expr.size());
      const std::string factor = expr.substr(at, star - at);
      at = star + 1;
      if (!factor.empty() && std::isdigit(static_cast<unsigned char>(factor[0]))) {
        v *= std::stod(factor);
        continue;
      }
      const auto it = s.constants.find(factor);
      SCALEDL_CHECK(it != s.constants.end() && it->is_number_integer() && it->get<int64_t>() >= 1,
                    "{}: constants_json of {} lacks {} as a positive integer (needed for {}.{})", s.where,
                    p.name, factor, info.name, info.dims[i]);
      v *= static_cast<double>(it->get<int64_t>());
    }
    SCALEDL_CHECK(v < 1e15, "{}: {}.{} = {} of {} is too large", s.where, info.name, info.dims[i], expr,
                  p.name);
    dims.push_back(static_cast<int64_t>(v));
  }
  try {
    validate_dims(p.type, dims);
  } catch (const Error& e) {
    fail("{}: {}: {}", s.where, p.name, e.what());
  }
  return dims;
}

/// The framework of a run, from the torch pin of requirements.txt at its commit (the shared
/// data's README: 2.5.0 + CUDA 12.4 up to 2025-08, 2.9.0 with a CUDA 12.8 image after). A
/// date alone would mislabel 3396fc0c (2025-10-23, a branch still pinned to 2.5.0).
std::string framework(const RunInfo& run, bool amd) {
  if (amd) return "PyTorch eager on ROCm (version not recorded at the commit)";
  if (run.torch_pin == "torch==2.5.0") return "PyTorch 2.5.0 eager (CUDA 12.4)";
  if (run.torch_pin == "torch==2.9.*") return "PyTorch 2.9.0 eager (CUDA 12.8)";
  if (run.torch_pin == "torch" || run.torch_pin.empty())
    return "PyTorch eager (torch not pinned at the commit; 2.5.0 with CUDA 12.4 per the upstream README)";
  return fmt::format("PyTorch eager ({} at the commit)", run.torch_pin);
}

Provenance run_provenance(const RunInfo& run, bool amd) {
  return {"kernelbench",
          kRepository,
          run.commit,
          "MIT",
          framework(run, amd),
          fmt::format("FP32 forward under torch.no_grad, {} events, mean of {} trials after 3 warm-ups "
                      "(the stored median_ms is that mean); {}",
                      amd ? "HIP (torch.cuda)" : "CUDA", kTrials,
                      run.flushes_l2 ? "L2 flushed before each trial" : "L2 not flushed between trials")};
}

/// One timing of a (layer, dims, GPU): a problem of one run.
struct Timing {
  double mean_ms = 0;
  double cv = NAN;  ///< std / mean of its trials
  int rank = 1;
  std::string problem;
  Provenance prov;
};

/// The timings of one (layer, dims, GPU).
struct Group {
  LayerType type = LayerType::Linear;
  std::vector<int64_t> dims;
  const DeviceRecord* dev = nullptr;
  std::vector<Timing> timings;
};

std::string join(const std::set<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

/// The stored row of a group: the median of its lowest-rank timings' means (the rest are
/// counted as skipped), n = their count (100 = the trials of a single timing), cv the
/// larger of the spread of the means and their median within-run cv.
void add_group(GpuImport& imp, Group& g) {
  int best = 1 << 30;
  std::string best_problem;
  for (const auto& t : g.timings)
    if (t.rank < best || (t.rank == best && t.problem < best_problem))
      best = t.rank, best_problem = t.problem;
  std::vector<const Timing*> use;
  for (const auto& t : g.timings) {
    if (t.rank == best) {
      use.push_back(&t);
    } else {
      imp.skip(fmt::format("{} (same shape and GPU also timed as {})", t.problem, best_problem));
    }
  }
  std::sort(use.begin(), use.end(), [](const Timing* a, const Timing* b) {
    return std::tie(a->mean_ms, a->prov.commit, a->problem) <
           std::tie(b->mean_ms, b->prov.commit, b->problem);
  });
  const size_t n = use.size();
  LayerMeasurement m;
  m.type = g.type;
  m.dims = g.dims;
  m.dtype = DType::FP32;
  if (n == 1) {
    m.fwd.median_ms = use[0]->mean_ms;
    m.fwd.cv = use[0]->cv;
    m.fwd.n = kTrials;
    imp.add_layer(std::move(m), *g.dev, use[0]->prov);
    return;
  }
  const double med = n % 2 ? use[n / 2]->mean_ms : 0.5 * (use[n / 2 - 1]->mean_ms + use[n / 2]->mean_ms);
  double mean = 0, var = 0;
  std::vector<double> cvs;
  for (const auto* t : use) {
    mean += t->mean_ms / n;
    if (!std::isnan(t->cv)) cvs.push_back(t->cv);
  }
  for (const auto* t : use) var += (t->mean_ms - mean) * (t->mean_ms - mean) / (n - 1);
  double cv = std::sqrt(var) / mean;
  if (!cvs.empty()) {
    std::sort(cvs.begin(), cvs.end());
    const size_t k = cvs.size();
    cv = std::max(cv, k % 2 ? cvs[k / 2] : 0.5 * (cvs[k / 2 - 1] + cvs[k / 2]));
  }
  m.fwd.median_ms = med;
  m.fwd.cv = cv;
  m.fwd.n = static_cast<int>(n);
  // One provenance per set of runs (not per row): the commits, frameworks and timing modes.
  std::set<std::string> commits, frameworks, timed;
  for (const auto* t : use) {
    commits.insert(t->prov.commit);
    frameworks.insert(t->prov.framework);
    timed.insert(t->prov.timed);
  }
  Provenance p = use[0]->prov;
  p.commit = join(commits, ", ");
  p.framework = join(frameworks, " | ");
  p.timed = fmt::format(
      "median of the means of every timing of this shape on this GPU (n = their count; runs at the commits "
      "above, and problems of the same GEMM); each {}",
      join(timed, " | "));
  imp.add_layer(std::move(m), *g.dev, p);
}

}  // namespace

GpuImportSummary import_kernelbench(const GpuImportOptions& opt, Store& store) {
  GpuImport imp("kernelbench", opt);
  const fs::path root(opt.root);
  SCALEDL_CHECK(fs::is_directory(root), "--root=\"{}\" is not a folder (expected KernelBench's, with {})",
                opt.root, kEagerFile);
  const Table eager = read_csv(root / kEagerFile), shapes_csv = read_csv(root / kShapesFile),
              runs_csv = read_csv(root / kRunsFile);
  const auto runs = read_runs(runs_csv);
  const auto shapes = read_shapes(shapes_csv);
  imp.summary().files = 3;

  const int c_gpu = eager.need("gpu_hardware"), c_dir = eager.need("timing_dir"),
            c_commit = eager.need("eager_timing_commit"), c_ps = eager.need("problem_set_id"),
            c_id = eager.need("problem_id"), c_name = eager.need("problem_name"),
            c_ms = eager.need("eager_ms"), c_sd = eager.need("eager_std_ms");
  const int c_flag = eager.col("flag");  // optional

  std::map<std::pair<std::string, std::string>, Group> groups;  // (device key, layer key) -> timings
  for (size_t r = 1; r < eager.recs.size(); ++r) {
    const auto& f = eager.recs[r];
    const std::string where = eager.where(r);
    ++imp.summary().rows;
    // The file's form first: a bad number is an Error whatever the row's problem.
    const int64_t id = parse_int(f[c_id], where, "problem_id");
    const double ms = f[c_ms].empty() ? NAN : parse_number(f[c_ms], where, "eager_ms");
    const double sd = f[c_sd].empty() ? NAN : parse_number(f[c_sd], where, "eager_std_ms");
    const std::string& name = f[c_name];
    if (c_flag >= 0 && !f[c_flag].empty()) {
      imp.refuse(f[c_flag]);
      continue;
    }
    if (f[c_ms].empty()) {
      imp.refuse("no eager time (a null entry: the run failed)");
      continue;
    }
    const ProblemMap* p = find_problem(name);
    if (!p) {
      SCALEDL_CHECK(!name.empty(), "{}: problem_name is empty", where);
      imp.skip(name);
      continue;
    }
    const auto s = shapes.find({f[c_ps], id});
    SCALEDL_CHECK(s != shapes.end(), "{}: problem (problem_set_id={}, problem_id={}) has no row in {}", where,
                  f[c_ps], id, shapes_csv.path);
    const auto run = runs.find({f[c_dir], f[c_commit]});
    SCALEDL_CHECK(run != runs.end(), "{}: run (timing_dir={}, eager_timing_commit={}) has no eager row in {}",
                  where, f[c_dir], f[c_commit], runs_csv.path);
    if (s->second.name != name) {
      imp.refuse("problem name differs from its problem set's");
      continue;
    }
    const std::string& gpu = f[c_gpu];
    const DeviceRecord* dev = imp.device_or_refuse(gpu);
    if (!dev) continue;
    if (!std::isnan(sd) && !(sd >= 0)) {
      imp.refuse("eager_std_ms negative");
      continue;
    }
    LayerMeasurement m;
    m.type = p->type;
    m.dims = problem_dims(*p, s->second);
    m.dtype = DType::FP32;
    m.fwd.median_ms = ms;
    if (const std::string why = implausible_layer_row(m, *dev, imp.options().tolerance); !why.empty()) {
      imp.refuse(why);
      continue;
    }
    const bool amd = gpu.rfind("AMD", 0) == 0;
    Group& g = groups[{dev->key(), layer_key(m.type, m.dims, m.dtype)}];
    g.type = m.type;
    g.dims = m.dims;
    g.dev = dev;
    g.timings.push_back(Timing{ms, sd / ms, p->rank, name, run_provenance(run->second, amd)});
  }
  for (auto& [key, g] : groups) add_group(imp, g);
  return imp.write(store);
}

}  // namespace scaledl
