#!/usr/bin/env bash
# A short calibration benchmark (docs/unseen-gpu.md, "A short calibration benchmark"), on
# committed data only, into docs/results/unseen-gpu/calibration/: the issue's protocol
# (leave one GPU out end to end, the default bundle's data and options: e2e-default of
# scripts/reproduce/sustained_bw.sh) with the held-out GPU's layer times calibrated by K of its own
# layer rows per kind (`eval --calibrate-rows K`, what `predict --calibrate` does with a
# short `bench layers` on the GPU), K = 8, 16, 64 and all; then the H200 test set
# calibrated with NeuSight's operator set timed on the H200 (`eval_h200.py --calibrate-ops`).
#   scripts/reproduce/calibration_check.sh [SEEDS]      (default 3; ~25 min on 2 cores, two runs at a time)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
SEEDS=${1:-3}
OUT=docs/results/unseen-gpu/calibration
WORK=out/unseen-gpu
mkdir -p "$OUT" "$WORK"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if [ ! -f "$WORK/ns-h100ops.sqlite" ]; then
  "$BIN" import neusight --root datasets/neusight --db "$WORK/ns-h100ops.sqlite" > /dev/null
  "$BIN" import neusight --root datasets/h100/neusight-ops --db "$WORK/ns-h100ops.sqlite" --campaign h100-ops > /dev/null
fi
E2E="eval --db $WORK/ns-h100ops.sqlite --protocol leave-one-device-out --methods sum,scaledl-tc --seeds $SEEDS
  --transfer-features --arch-features --no-device-features --kernel-time --sustained-bw --no-plots --quiet"
"$BIN" $E2E --calibrate-rows 8 --out "$OUT/e2e-k8" &
"$BIN" $E2E --calibrate-rows 16 --out "$OUT/e2e-k16"
wait
"$BIN" $E2E --calibrate-rows 64 --out "$OUT/e2e-k64" &
"$BIN" $E2E --calibrate-rows 100000 --out "$OUT/e2e-all"
wait
python3 scripts/reproduce/unseen_gpu_tables.py e2e "$OUT/e2e-k8" "$OUT/e2e-k16" "$OUT/e2e-k64" "$OUT/e2e-all" > "$OUT/e2e-tables.md"
python3 scripts/reproduce/eval_h200.py --no-anchors --calibrate-ops datasets/h200/neusight-ops --scaledl "$BIN" --out "$OUT/h200"
echo "wrote $OUT"
