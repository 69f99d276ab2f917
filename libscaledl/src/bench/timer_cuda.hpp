#pragma once
// C-style bridge to the CUDA runtime used by timer.cpp. Implemented in
// timer_cuda.cu (-DSCALEDL_CUDA=ON) or timer_nocuda.cpp (stand-in). No CUDA
// types cross this boundary, and no std::string either (nvcc and the host
// compiler may disagree on the libstdc++ ABI flag that LibTorch sets).
namespace scaledl::cudart {

/// True when this build has CUDA kernels (timer_cuda.cu was compiled).
bool built_with_cuda();
/// CUDA runtime version as major*1000 + minor*10 (12040 = 12.4); 0 without CUDA.
int runtime_version();
/// Creates a CUDA event on the current device; nullptr without CUDA or on failure.
void* event_create();
void event_destroy(void* ev);
/// Records `ev` on the legacy default stream (the stream LibTorch uses unless told otherwise).
void event_record(void* ev);
/// Waits for `stop` and returns the ms between the two events; < 0 on failure.
double event_elapsed_ms(void* start, void* stop);

}  // namespace scaledl::cudart
