# SCALEDL_CUDA=AUTO|ON|OFF decides whether .cu sources are compiled.
# Without CUDA the build still succeeds: GPU kernels compile to a stub that
# throws "rebuild with -DSCALEDL_CUDA=ON".
set(SCALEDL_HAVE_CUDA OFF)
if(NOT SCALEDL_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Turing..Hopper (CUDA 13 dropped sm_70); PTX for the newest so later GPUs JIT it.
      set(CMAKE_CUDA_ARCHITECTURES 75 80 90)
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    find_package(CUDAToolkit REQUIRED)
    set(SCALEDL_HAVE_CUDA ON)
  elseif(SCALEDL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SCALEDL_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
endif()
message(STATUS "ScaleDL: CUDA kernels ${SCALEDL_HAVE_CUDA}")
