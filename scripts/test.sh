#!/usr/bin/env bash
# Builds the tests (and the tools they drive) in the build from scripts/setup.sh,
# then runs them through CTest.
#
#   scripts/test.sh           every test but those labelled `slow` (test/slow-tests.txt)
#   scripts/test.sh --slow    only the slow ones
#   scripts/test.sh --all     all of them
#   Other arguments go to ctest (e.g. -R Bundle, --rerun-failed).
# CI runs the first two and builds the benchmarks (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
[ -f "$BUILD_DIR/CMakeCache.txt" ] || { echo "test.sh: no build in $BUILD_DIR; run scripts/setup.sh first" >&2; exit 2; }
SELECT=(-LE slow)
case "${1:-}" in
  --slow) SELECT=(-L slow); shift ;;
  --all) SELECT=(); shift ;;
esac
cmake --build "$BUILD_DIR" -j "$(nproc)" --target scaledl_tests
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "${SELECT[@]}" "$@"
