// scaledl import aiconfigurator | kernelbench | vidur | deepbench | training-kinds: public GPU
// operator timings of many GPU types (and our own, training-kinds) into a store, each row keyed to a spec
// sheet of models/devices (docs/gpu-data.md). The logic is the library's (scaledl/gpudata/gpudata.hpp).
#include <iostream>
#include <memory>

#include "command.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "scaledl/io/store.hpp"

namespace {

using ImportFn = scaledl::GpuImportSummary (*)(const scaledl::GpuImportOptions&, scaledl::Store&);

struct GpuImportCli {
  scaledl::GpuImportOptions opt;
  std::string db;
  bool json = false;
};

/// One registrar per source: the same options, another importer.
scaledl::cli::Registrar gpu_import(const char* source, const char* what, ImportFn fn) {
  return scaledl::cli::Registrar({"import", source}, what, [fn](CLI::App& app) {
    auto o = std::make_shared<GpuImportCli>();
    app.add_option("--root", o->opt.root, "the source's folder (its shared data, or datasets/gpus/<source>)")
        ->required();
    app.add_option("--db", o->db, "results store (SQLite), created if missing")->required();
    app.add_option("--devices", o->opt.devices_dir, "folder of GPU spec sheets the rows are keyed to")
        ->capture_default_str();
    app.add_option("--campaign", o->opt.campaign, "campaign name of the rows (default: the source's name)");
    app.add_option("--tolerance", o->opt.tolerance,
                   "refuse a row faster than its spec peak (FLOP or bandwidth) by more than this share")
        ->capture_default_str();
    app.add_flag("--json", o->json, "print the summary as JSON");
    return [o, fn] {
      scaledl::Store store(o->db);
      const auto s = fn(o->opt, store);
      std::cout << (o->json ? s.to_json().dump(2) + "\n" : s.to_text());
      return 0;
    };
  });
}

scaledl::cli::Registrar reg_aic =
    gpu_import("aiconfigurator",
               "Import NVIDIA AIConfigurator's GEMM (BF16, FP8) and NCCL collective timings (Apache-2.0)",
               scaledl::import_aiconfigurator);
scaledl::cli::Registrar reg_kb =
    gpu_import("kernelbench", "Import KernelBench level-1 FP32 eager single-op timings of many GPUs (MIT)",
               scaledl::import_kernelbench);
scaledl::cli::Registrar reg_vidur =
    gpu_import("vidur", "Import Vidur's FP16 per-operator LLM layer profiles and collectives (MIT)",
               scaledl::import_vidur);
scaledl::cli::Registrar reg_db =
    gpu_import("deepbench", "Import DeepBench's GEMM and all-reduce timings of older GPUs (Apache-2.0)",
               scaledl::import_deepbench);
scaledl::cli::Registrar reg_tk = gpu_import(
    "training-kinds",
    "Import our own GPU timings of training's kernels (scripts/gpu/gpu_training_kinds.py's folder: BF16 "
    "norms, GELU, dropout, add, embedding, loss, SDPA forward and backward, forward GEMMs in BF16 and FP8)",
    scaledl::import_training_kinds);

}  // namespace
