// CPU-only stand-in of probe_cuda.cu.
#include <cstdio>

#include "bench/probe_cuda.hpp"

namespace scaledl::cudaprobe {
namespace {
int no_cuda(char* err, int err_len) {
  std::snprintf(err, static_cast<size_t>(err_len),
                "this build has no CUDA kernels; rebuild with -DSCALEDL_CUDA=ON");
  return 1;
}
}  // namespace
int get_props(int, Props*, char* err, int err_len) {
  return no_cuda(err, err_len);
}
int fma_gflops(int, double*, char* err, int err_len) {
  return no_cuda(err, err_len);
}
}  // namespace scaledl::cudaprobe
