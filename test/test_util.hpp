#pragma once
// Small helpers shared by the unit tests.
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/checksum.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/io/device.hpp"

namespace scaledl::test {

/// Path of a fresh SQLite store in the test temp dir: the file and its WAL/SHM
/// companions from an earlier run are removed.
inline std::string fresh_store_path(const std::string& name) {
  std::string p = testing::TempDir() + "/" + name;
  for (const char* s : {"", "-wal", "-shm"}) std::remove((p + s).c_str());
  return p;
}

/// Writes a layer-model manifest a test edited to `path`, its manifest_sha256 computed
/// again over the other keys (as LayerPredictor::save signs it): the load then sees an
/// intact file that holds the edit.
inline void write_signed_manifest(const std::string& path, nlohmann::json man) {
  man.erase("manifest_sha256");
  man["manifest_sha256"] = sha256_hex(man.dump());
  std::ofstream(path) << man.dump(2);
}

/// The message of the scaledl::Error that `f` throws: "<no error>" when it
/// throws nothing, "NOT A scaledl::Error: ..." for any other exception.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("NOT A scaledl::Error: ") + e.what();
  }
  return "<no error>";
}

/// A GPU spec-sheet record for tests: FP32 peak `gflops`, bandwidth `bw` GB/s,
/// `sms` streaming multiprocessors, 1.4 GHz, 32 GB, 6 MB L2.
inline DeviceRecord spec_gpu(const std::string& name, double gflops, double bw, int64_t sms = 80) {
  DeviceRecord d;
  d.name = name;
  d.kind = "spec";
  d.cores = sms;
  d.clock_mhz = 1400;
  d.mem_gb = 32;
  d.l2_mb = 6;
  d.peak_fp32_gflops = gflops;
  d.peak_mem_bw_gbs = bw;
  return d;
}

}  // namespace scaledl::test
