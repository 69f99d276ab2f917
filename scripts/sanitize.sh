#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (gcc;
# docs/hardening.md).
#
#   scripts/sanitize.sh [ctest args...]
#
# Configures build-asan/ (RelWithDebInfo at -O1, -DSCALEDL_SANITIZE=address,undefined,
# tests on, bench off, CUDA off), builds everything and runs ctest there. Any ASan
# or UBSan report fails the test that triggered it (halt_on_error=1,
# -fno-sanitize-recover=undefined). Leak checking is off (detect_leaks=0): the
# leaks LSan reports here are allocations LibTorch, OpenMP and XGBoost keep for
# the life of the process; the fuzz targets run LSan on our code instead.
# Findings inside third-party libraries are suppressed in scripts/sanitize.supp
# (commented), never by changing our code.
#
# Environment: BUILD_DIR (default build-asan), JOBS (default nproc),
# SANITIZE (default address,undefined), CXX (default g++).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-asan}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$BUILD_DIR"
CXX=${CXX:-g++} CC=${CC:-gcc} cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DSCALEDL_SANITIZE="${SANITIZE:-address,undefined}" \
      -DSCALEDL_CUDA=OFF -DSCALEDL_BUILD_TESTS=ON -DSCALEDL_BUILD_BENCH=OFF >"$BUILD_DIR/configure.log" 2>&1 ||
  { cat "$BUILD_DIR/configure.log" >&2; echo "sanitize.sh: configure failed" >&2; exit 2; }
cmake --build "$BUILD_DIR" -j "$JOBS"

SUPP="$PWD/scripts/sanitize.supp"
export ASAN_OPTIONS=${ASAN_OPTIONS:-"detect_leaks=0:halt_on_error=1:abort_on_error=1:print_stacktrace=1:detect_odr_violation=0:suppressions=$SUPP"}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-"halt_on_error=1:print_stacktrace=1:suppressions=$SUPP"}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 1800 "$@"
