#pragma once
// C-style bridge to probe_cuda.cu (or its stand-in probe_nocuda.cpp). Plain
// types only (see timer_cuda.hpp for why).
namespace scaledl::cudaprobe {

/// Device attributes of GPU `index`. Returns 0 on success, else fills `err`
/// (NUL-terminated, at most err_len bytes) and returns non-zero.
struct Props {
  char name[256];
  int sms;
  double clock_mhz;  ///< max SM clock
  double mem_gb;     ///< total global memory, GB (1e9 bytes)
  double l2_mb;      ///< L2 size, MB (2^20 bytes)
  int cc_major, cc_minor;
  double mem_clock_mhz;  ///< max memory clock
  int driver_version;    ///< cudaDriverGetVersion (e.g. 13000), 0 = unknown
};
int get_props(int index, Props* out, char* err, int err_len);
/// Runs the FMA kernel on GPU `index`; stores GFLOP/s. Same error convention.
int fma_gflops(int index, double* gflops, char* err, int err_len);

}  // namespace scaledl::cudaprobe
