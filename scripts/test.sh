#!/usr/bin/env bash
# Runs the whole test suite (GoogleTest through CTest) on the build from setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
[ -x "$BUILD_DIR/tools/scaledl" ] || { echo "test.sh: no build in $BUILD_DIR; run scripts/setup.sh first" >&2; exit 2; }
cmake --build "$BUILD_DIR" -j "$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@"
