// NeuSight CSV files (learn/neusight.cpp) as `scaledl import neusight` reads
// them: parse_csv on the text, then read_neusight_csv on a file, and the same
// file as a per-node trace (read_neusight_trace, learn/neusight_traces.cpp).
#include "fuzz_util.hpp"
#include "scaledl/learn/neusight.hpp"

using namespace scaledl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::guarded([&] {
    std::vector<size_t> lines;
    const auto recs = parse_csv(text, "fuzz.csv", &lines);
    if (lines.size() != recs.size()) fuzz::bug("parse_csv: first_line and records differ in length");
  });
  const std::string path = fuzz::write_file("ops.csv", text);
  static const std::map<std::string, std::string> devices = {
      {"Tesla T4", "spec:Tesla T4"}, {"NVIDIA A100-PCIE-40GB", "spec:NVIDIA A100-PCIE-40GB"}};
  fuzz::guarded([&] {
    NeusightImportSummary sum;
    for (const auto& m : read_neusight_csv(path, "neusight", devices, sum)) {
      validate_dims(m.type, m.dims);
      (void)layer_key(m.type, m.dims, m.dtype);
    }
  });
  const std::string trace =
      fuzz::write_file("gpt2_large-train-1024-4.csv", text);  // a training label: dropout maps
  fuzz::guarded([&] {
    NeusightTraceSummary sum;
    for (const auto& m : read_neusight_trace(trace, "neusight-traces", "spec:Tesla T4", sum)) {
      validate_dims(m.type, m.dims);
      if (!(m.fwd.median_ms >= kTraceMinMs)) fuzz::bug("read_neusight_trace: a row below the launch floor");
    }
    if (sum.mapped > sum.nodes || sum.below_floor > sum.mapped)
      fuzz::bug("read_neusight_trace: summary counts");
  });
  return 0;
}
