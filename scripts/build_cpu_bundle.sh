#!/usr/bin/env bash
# Trains the CPU bundle, models/bundles/cpu, on every committed CPU campaign (six machines: the
# AMD EPYC VMs of cpu-v2, cpu-llamas and cpu-deepseek, the Zen 4 VMs of cpu-zen4 and cpu-zen4-p3,
# the Intel VM of cpu-intel; each store with its machine's probe record), with the device
# features, so that a CPU known by its probe record (`scaledl probe`) is predicted from what these
# machines measured. `predict` takes it when the device is a CPU and no --bundle is given.
# It is built here rather than committed: 10 MB, more than the repository's size budget holds.
#   scripts/build_cpu_bundle.sh            (1 min 57 s on a 2-vCPU Intel Xeon VM with AMX, family 6 model 167)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
[ -x "$BIN" ] || { echo "scaledl: error: $BIN not built (run scripts/setup.sh)" >&2; exit 1; }
OUT=${1:-models/bundles/cpu}
DBS=()
for s in datasets/cpu-v2/cpu-v2.sqlite datasets/cpu-v2/cpu-v2-rest.sqlite datasets/cpu-intel/cpu-intel.sqlite \
         datasets/cpu-zen4/cpu-zen4.sqlite datasets/cpu-zen4-p3/cpu-zen4-p3.sqlite \
         datasets/cpu-llamas/cpu-llamas.sqlite datasets/cpu-deepseek/cpu-deepseek.sqlite; do
  DBS+=(--db "$s")
done
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
"$BIN" train "${DBS[@]}" --out "$OUT" --seed 0
echo "wrote $OUT"
