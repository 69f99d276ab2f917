// Collective calibrations and measurements (comm/comm.cpp, comm/nccl_tests.cpp,
// comm/collective_fit.cpp): the `--comm FILE` JSON that `predict`, `scale` and
// `train` read (fitted constants or all-reduce samples), and the nccl-tests /
// vTrain files of `scaledl import nccl-tests`, then `comm fit` of their rows.
// Every input goes through both readers; its last byte picks the file name the
// nccl-tests parser sees (the collective and vTrain's world come from it; a
// newline gives AR_GPU8_*, vTrain's 8-GPU table).
#include "fuzz_util.hpp"
#include "scaledl/comm/collectives.hpp"
#include "scaledl/comm/comm.hpp"
#include "scaledl/core/json_util.hpp"

#include <cmath>

using namespace scaledl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 1. A calibration file (load_comm_model). Invariants: what loads is plausible,
  //    prices an all-reduce finitely, and reads back from its own to_json.
  const std::string path = fuzz::write_file("comm.json", data, size);
  fuzz::guarded([&] {
    const CommModel m = load_comm_model(path);
    if (!fuzz::guarded([&] { check_comm_plausible(m, "loaded"); }))
      fuzz::bug("load_comm_model returned an implausible model: " + m.to_json().dump());
    for (int64_t n : {2, 8, 1 << 20})
      if (!std::isfinite(m.time_s(1e9, n)) || m.time_s(1e9, n) < 0)
        fuzz::bug("time_s not finite for " + m.to_json().dump());
    (void)cross_node_comm_warning(m, 2);
    const json stored = m.to_json();
    if (!fuzz::guarded(
            [&] { (void)CommModel::from_json(parse_json_text(stored.dump(), "stored"), "stored"); }))
      fuzz::bug("CommModel::from_json(load_comm_model(x).to_json()) threw: " + stored.dump());
  });

  // 2. The same bytes as an nccl-tests or vTrain file, then the fits `comm fit` makes of its rows.
  static const char* kNames[] = {"all_reduce_perf.txt", "all_gather_perf.txt",  "reduce_scatter_perf.txt",
                                 "sendrecv_perf.txt",   "AR_GPU8_1M_1024M_LUT", "run.log"};
  const std::string name = kNames[size ? data[size - 1] % 6 : 0];
  const std::string text(reinterpret_cast<const char*>(data), size);
  NcclTestsImportOptions o;
  if (name == "run.log") o.collective = "allreduce";
  fuzz::guarded([&] {
    NcclTestsRefused refused;
    const auto rows = parse_nccl_tests_text(text, name, o, &refused);
    for (const auto& r : rows)
      if (!(r.bytes > 0 && std::isfinite(r.time_s) && r.time_s > 0 && r.world >= 2 && r.nodes >= 1 &&
            r.nodes <= r.world))
        fuzz::bug("parse_nccl_tests_text returned a row it should have refused: bytes " +
                  std::to_string(r.bytes) + " time_s " + std::to_string(r.time_s) + " world " +
                  std::to_string(r.world));
    fuzz::guarded([&] {
      const auto fits = fit_collectives(rows);
      const json j = comm_fit_json(fits);
      if (j.contains("bandwidth_Bps") && !fuzz::guarded([&] {
            (void)CommModel::from_json(parse_json_text(j.dump(), "comm fit"), "comm fit");
          }))
        fuzz::bug("the calibration comm_fit_json wrote does not load: " + j.dump().substr(0, 2000));
    });
  });
  return 0;
}
