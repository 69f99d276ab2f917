#!/usr/bin/env bash
# Leave-one-GPU-out of the layer models over every GPU type with operator data
# (docs/results/gpus/): imports the committed public data (NeuSight, AIConfigurator,
# KernelBench, Vidur, DeepBench) and our own H100 rows into one store, then trains on
# all GPUs but one and predicts the held-out GPU from its spec sheet, for each GPU.
#
#   scripts/studies/gpu_loo.sh [OUT] [eval layers options...]
# OUT (default out/gpus) gets gpus.sqlite, imports.txt, loo.txt (the eval's table),
# loo.csv (every held-out row) and tables.md (per type, dtype and GPU).
# LAYER_ARGS: the layer models' options (default: those of the default bundle).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
OUT=${1:-out/gpus}
shift || true
LAYER_ARGS=${LAYER_ARGS:-"--transfer-features --arch-features --no-device-features --kernel-time --dtype-rates --sustained-bw --split-direction"}
mkdir -p "$OUT"
DB=$OUT/gpus.sqlite
rm -f "$DB" "$DB-wal" "$DB-shm"
{
  "$BIN" import neusight --root datasets/neusight --db "$DB"
  "$BIN" import neusight --root datasets/h100/neusight-ops --db "$DB" --campaign h100-ops
  for s in aiconfigurator kernelbench vidur deepbench; do
    "$BIN" import "$s" --root "datasets/gpus/$s" --db "$DB"
  done
} > "$OUT/imports.txt"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=1
# shellcheck disable=SC2086
/usr/bin/time -f "eval layers: %e s, %M KB" "$BIN" eval layers --db "$DB" --db datasets/h100/h100.sqlite \
  --leave-one-out device --methods xgboost $LAYER_ARGS --predictions "$OUT/loo.csv" "$@" > "$OUT/loo.txt"
python3 scripts/studies/loo_tables.py "$OUT/loo.csv" > "$OUT/tables.md"
echo "wrote $OUT/tables.md"
