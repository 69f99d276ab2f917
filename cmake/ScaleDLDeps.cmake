# Third-party dependencies. All come from Debian packages (scripts/setup.sh);
# LibTorch may instead come from a PyTorch install through -DTorch_DIR=...
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
# LibTorch 2.x ships its own (newer) fmt headers on its include path. A TU that
# sees those headers must not link Debian's libfmt.so.9: build fmt header-only then.
option(SCALEDL_FMT_HEADER_ONLY "Use fmt header-only (set when LibTorch bundles another fmt)" OFF)
if(SCALEDL_FMT_HEADER_ONLY)
  set(SCALEDL_FMT_TARGET fmt::fmt-header-only)
else()
  set(SCALEDL_FMT_TARGET fmt::fmt)
endif()
find_package(nlohmann_json 3.9 REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(CLI11 REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)  # SHA-256 of bundle files
# CMake >= 4.1 renamed the imported target; older versions only know SQLite::SQLite3.
if(TARGET SQLite3::SQLite3)
  set(SCALEDL_SQLITE_TARGET SQLite3::SQLite3)
else()
  set(SCALEDL_SQLITE_TARGET SQLite::SQLite3)
endif()
find_package(xgboost REQUIRED)

# Issue #15, `scaledl bench pipeline`: a real tokenizer and a real JPEG decoder
# (Debian: libsentencepiece-dev, libturbojpeg0-dev; scripts/setup.sh installs both).
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE IMPORTED_TARGET sentencepiece)
pkg_check_modules(TURBOJPEG IMPORTED_TARGET libturbojpeg)
if(NOT SENTENCEPIECE_FOUND)
  message(FATAL_ERROR "ScaleDL: SentencePiece not found (pkg-config sentencepiece): "
                      "apt-get install libsentencepiece-dev (or run scripts/setup.sh)")
endif()
if(NOT TURBOJPEG_FOUND)
  message(FATAL_ERROR "ScaleDL: TurboJPEG not found (pkg-config libturbojpeg): "
                      "apt-get install libturbojpeg0-dev (or run scripts/setup.sh)")
endif()

# LibTorch: Debian's 1.13 (CPU) or a 2.x from PyTorch (CUDA). Only the stages
# that need tensors (bench, gnn, learn's MLP baseline) link it.
find_package(Torch REQUIRED)
# TorchConfig appends its own flags to CMAKE_CXX_FLAGS (e.g. -D_GLIBCXX_USE_CXX11_ABI);
# keep them global so that every TU agrees on the ABI.
set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} ${TORCH_CXX_FLAGS}")
# Debian's LibTorch is CPU-only (its c10/cuda headers are incomplete); PyTorch's
# CUDA builds export c10_cuda. Code that needs LibTorch's CUDA internals checks
# SCALEDL_TORCH_CUDA, not just whether nvcc was found.
if(TARGET c10_cuda OR TARGET torch_cuda)
  set(SCALEDL_TORCH_CUDA ON)
else()
  set(SCALEDL_TORCH_CUDA OFF)
endif()
message(STATUS "ScaleDL: LibTorch ${Torch_VERSION} from ${Torch_DIR} (CUDA: ${SCALEDL_TORCH_CUDA})")

# scaledl_torch_pch(TARGET...): <torch/torch.h> as the precompiled header of
# each C++ target given (CUDA sources are left alone), when SCALEDL_PCH is on.
# The first target of a call builds it and the others of the same call reuse
# that one file (REUSE_FROM), so a call must name targets compiled with the same
# flags (a PCH of LibTorch is ~570 MB and ~1 min to build, per copy).
function(scaledl_torch_pch)
  if(NOT SCALEDL_PCH)
    return()
  endif()
  set(_owner "")
  foreach(t ${ARGN})
    if(TARGET ${t})
      get_target_property(_type ${t} TYPE)
      if(NOT _type STREQUAL "INTERFACE_LIBRARY")
        if(_owner STREQUAL "")
          target_precompile_headers(${t} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:<torch/torch.h$<ANGLE-R>>")
          set(_owner ${t})
        else()
          target_precompile_headers(${t} REUSE_FROM ${_owner})
        endif()
      endif()
    endif()
  endforeach()
endfunction()
