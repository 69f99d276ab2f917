#!/usr/bin/env bash
# Rebuilds models/bundles/default from committed data only, byte for byte:
#   - datasets/neusight: public operator timings of five GPUs (P4, T4, P100,
#     V100, A100-PCIe-40GB) and their single-GPU end-to-end labels (MIT, NeuSight)
#   - datasets/h100/neusight-ops: NeuSight's operator microbenchmarks timed on our H100
#   - datasets/h100/h100.sqlite: our own H100 campaign (layers and models)
#   - datasets/h200/neusight-ops: NeuSight's operator microbenchmarks timed on our H200
#   - datasets/gpus/{aiconfigurator,kernelbench,vidur,deepbench}: public operator timings of
#     30 GPU types (docs/gpu-data.md), keyed to the spec sheets of models/devices
#   - datasets/h200/training-kinds: our H200's timings of training's kernels (import training-kinds)
# Layer models: XGBoost with the transfer columns (tiling, waves, device-relative)
# and the FP32 lanes per SM, without h^dev columns, so that a GPU known only by its
# spec sheet is predicted from its roofline and shape-on-device features; kernel
# times, each GPU's rows less its host's timing floor; memory-bound rooflines at each
# GPU's sustained bandwidth, so that a probe record's measured copy bandwidth counts
# (--sustained-bw; docs/unseen-gpu.md, "Sustained bandwidth"); one model per layer type and
# direction, each with its own timing floor (--split-direction, since 2026-11-30: docs/learn.md).
# Refinement: TransformerConv + MLP(Z) on the labelled runs of all six GPUs.
#
#   scripts/build_default_bundle.sh [--check]
# --check rebuilds into a temporary folder and compares it with the committed
# bundle (exit 1 when a file differs).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
[ -x "$BIN" ] || { echo "scaledl: error: $BIN not built (run scripts/setup.sh)" >&2; exit 1; }
OUT=models/bundles/default
WORK=out/default-bundle
if [ "${1:-}" = "--check" ]; then OUT=$WORK/check; fi
mkdir -p "$WORK"
rm -f "$WORK/neusight.sqlite" "$WORK/neusight.sqlite-wal" "$WORK/neusight.sqlite-shm"
"$BIN" import neusight --root datasets/neusight --db "$WORK/neusight.sqlite" > "$WORK/import.txt"
"$BIN" import neusight --root datasets/h100/neusight-ops --db "$WORK/neusight.sqlite" --campaign h100-ops >> "$WORK/import.txt"
"$BIN" import neusight --root datasets/h200/neusight-ops --db "$WORK/neusight.sqlite" --campaign h200-ops >> "$WORK/import.txt"
rm -f "$WORK/gpus.sqlite" "$WORK/gpus.sqlite-wal" "$WORK/gpus.sqlite-shm"
for s in ${GPU_SOURCES:-aiconfigurator kernelbench vidur deepbench}; do
  "$BIN" import "$s" --root "datasets/gpus/$s" --db "$WORK/gpus.sqlite" >> "$WORK/import.txt"
done
# Our H200's timings of training's kernels (BF16 norms, GELU, dropout, add, embedding, loss, SDPA
# forward and backward, forward GEMMs in BF16 and FP8): docs/gpu-data.md.
"$BIN" import training-kinds --root datasets/h200/training-kinds --db "$WORK/gpus.sqlite" >> "$WORK/import.txt"
# One thread everywhere (XGBoost, LibTorch, OpenBLAS): the same bytes on every run.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
"$BIN" train --db "$WORK/neusight.sqlite" --db datasets/h100/h100.sqlite --db "$WORK/gpus.sqlite" --out "$OUT" \
  --transfer-features --arch-features --no-device-features --kernel-time --dtype-rates --sustained-bw --split-direction --host-term --threads 1 --nthread 1 --seed 0 --graph-members 3 \
  --reproducible > "$WORK/train.txt"
if [ "${1:-}" = "--check" ]; then
  # The manifest records the command, whose --out differs: compare it with that path put back.
  sed -i "s#--out $OUT #--out models/bundles/default #" "$OUT/manifest.json"
  if diff -r models/bundles/default "$OUT" > "$WORK/check.diff"; then
    echo "models/bundles/default: rebuilt byte for byte"
  else
    echo "scaledl: error: models/bundles/default differs from a rebuild (see $WORK/check.diff)" >&2
    exit 1
  fi
else
  echo "wrote $OUT"
fi
