// CPU-only stand-in of timer_cuda.cu: reports "no CUDA", so Timer falls back
// to steady_clock + torch::cuda::synchronize() on a CUDA device.
#include "bench/timer_cuda.hpp"

namespace scaledl::cudart {
bool built_with_cuda() {
  return false;
}
int runtime_version() {
  return 0;
}
void* event_create() {
  return nullptr;
}
void event_destroy(void*) {}
void event_record(void*) {}
double event_elapsed_ms(void*, void*) {
  return -1;
}
}  // namespace scaledl::cudart
