# Sanitiser and fuzzing builds (docs/hardening.md). Both default off; the normal
# Release build is unchanged.
#
#   -DSCALEDL_SANITIZE=address,undefined   every target (library, CLI, tests, bench)
#                                          compiled and linked with -fsanitize=...;
#                                          UBSan findings abort (-fno-sanitize-recover)
#   -DSCALEDL_FUZZ=ON                      clang only: libFuzzer targets in fuzz/,
#                                          every target instrumented for coverage
#                                          (-fsanitize=fuzzer-no-link) plus ASan+UBSan
#                                          (unless SCALEDL_SANITIZE names others)
set(SCALEDL_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined (empty = none)")
option(SCALEDL_FUZZ "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)

set(_scaledl_san "${SCALEDL_SANITIZE}")
if(SCALEDL_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SCALEDL_FUZZ=ON needs clang for libFuzzer: configure a separate build directory "
                        "with CC=clang CXX=clang++ (scripts/fuzz.sh does)")
  endif()
  if(_scaledl_san STREQUAL "")
    set(_scaledl_san "address,undefined")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()
if(NOT _scaledl_san STREQUAL "")
  # Only C++ sources: nvcc would not understand these flags (CUDA is off in these builds anyway).
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${_scaledl_san}>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=${_scaledl_san})
  if(_scaledl_san MATCHES "undefined")
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  endif()
  message(STATUS "ScaleDL: sanitizers ${_scaledl_san}")
endif()
