// Design spaces (design/space.cpp) and their constraint / derived-parameter
// expressions (design/expr.cpp), through `scaledl plan`'s path: load_space on a
// file, candidate enumeration, the feature encoding and a small Fedorov design.
//
// Input: a space JSON (starts with '{'), or else the text of one expression,
// which the harness puts into a fixed layers space as a constraint and as the
// derived dim d_out (names: tokens, d_in, d_out, dtype, type, bias, s).
// Base model configs: "models/<name>.json" (a link to the repository's models/).
#include <algorithm>

#include "fuzz_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/design/plan.hpp"
#include "scaledl/design/space.hpp"

using namespace scaledl;

namespace {

void run_space(const std::string& path) {
  DesignSpace sp = load_space(path);
  // Keep one execution short: at most 64 candidates (sampled above that).
  sp.max_candidates = std::min<int64_t>(sp.max_candidates, 64);
  const CandidateSet cs = enumerate_candidates(sp, 1);
  for (size_t i = 0; i < cs.cands.size() && i < 4; ++i) (void)candidate_config(sp, cs.cands[i], "");
  const Encoder enc(sp, cs.cands);
  (void)enc.encode(cs.cands);
  PlanOptions po;
  po.budget = static_cast<int>(std::clamp<int64_t>(enc.p(), 1, static_cast<int64_t>(cs.cands.size())));
  po.seed = 1;
  po.starts = 1;
  po.threads = 1;
  po.plan_dir = fuzz::scratch().string() + "/work";
  const json plan = make_plan(sp, po);
  // Invariant: a plan `scaledl plan` writes is one `scaledl bench` reads.
  const std::string pp = fuzz::write_file("work/plan.json", plan.dump());
  if (!fuzz::guarded([&] { (void)load_plan(pp); }))
    fuzz::bug("load_plan rejected the plan that make_plan wrote: " + plan.dump().substr(0, 2000));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::link_models();
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string space = text;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos ||
      text[text.find_first_not_of(" \t\r\n")] != '{') {
    const json e = text;  // JSON string escaping of arbitrary bytes (invalid UTF-8 => dump throws)
    std::string quoted;
    try {
      quoted = e.dump(-1, ' ', false, json::error_handler_t::replace);
    } catch (...) {
      return 0;
    }
    space = R"({"kind": "layers", "fixed": {"type": "linear", "bias": 1, "s": 2},
      "parameters": [{"name": "tokens", "kind": "grid", "values": [1, 64, 4096]},
                     {"name": "d_in", "kind": "integer", "min": 16, "max": 1024, "count": 3},
                     {"name": "dtype", "kind": "categorical", "values": ["fp32", "bf16"]}],
      "derived": [{"name": "d_out", "expr": )" +
            quoted + R"(}], "constraints": [{"expr": )" + quoted + R"(}, {"max_memory_gb": 4}]})";
  }
  const std::string path = fuzz::write_file("work/space.json", space);
  fuzz::guarded([&] { run_space(path); });
  return 0;
}
