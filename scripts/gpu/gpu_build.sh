#!/usr/bin/env bash
# Configures and builds ScaleDL with CUDA against PyTorch's LibTorch on the lent GPU
# machine (.deps/ from scripts/gpu/fetch_gpu_deps.sh carried along). Used by
# scripts/gpu/gpu_campaign.sh and scripts/gpu/gpu_e2e_check.sh.
#   scripts/gpu/gpu_build.sh <log folder> [jobs]
set -uo pipefail
cd "$(dirname "$0")/../.."
LOG=${1:?log folder}; JOBS=${2:-16}
if [ ! -f .deps/gpu_env.sh ] && [ -f .deps-pack/root.tar.xz ]; then  # the packed form (fetch_gpu_deps.sh)
  python3 -c 'import tarfile; tarfile.open(".deps-pack/root.tar.xz").extractall(".deps")' || exit 1
fi
# the xgboost command-line program is not packed (4.7 MB); XGBoost's CMake targets only check that it exists
[ -e .deps/root/usr/bin/xgboost ] || { mkdir -p .deps/root/usr/bin && printf '#!/bin/sh\necho "xgboost CLI not carried" >&2; exit 1\n' > .deps/root/usr/bin/xgboost; }
source .deps/gpu_env.sh
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSCALEDL_CUDA=ON -DSCALEDL_FMT_HEADER_ONLY=ON \
      -DSCALEDL_BUILD_TESTS=ON -DSCALEDL_BUILD_BENCH=OFF > "$LOG/cmake.log" 2>&1 || { tail -30 "$LOG/cmake.log"; exit 1; }
cmake --build build-gpu -j "$JOBS" > "$LOG/build.log" 2>&1 || { grep -E "error|Error" "$LOG/build.log" | head -30; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
