// CUDA-event timing for Timer (see timer_cuda.hpp). Events are recorded on the
// legacy default stream (stream 0), which is LibTorch's default stream.
#include <cuda_runtime.h>

#include "bench/timer_cuda.hpp"

namespace scaledl::cudart {

bool built_with_cuda() {
  return true;
}

int runtime_version() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
}

void* event_create() {
  cudaEvent_t ev = nullptr;
  if (cudaEventCreate(&ev) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls do not see it
    return nullptr;
  }
  return static_cast<void*>(ev);
}

void event_destroy(void* ev) {
  if (ev) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
}

void event_record(void* ev) {
  cudaEventRecord(static_cast<cudaEvent_t>(ev), 0);
}

double event_elapsed_ms(void* start, void* stop) {
  auto e1 = static_cast<cudaEvent_t>(stop);
  if (cudaEventSynchronize(e1) != cudaSuccess) return -1;
  float ms = 0;
  if (cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), e1) != cudaSuccess) return -1;
  return ms;
}

}  // namespace scaledl::cudart
