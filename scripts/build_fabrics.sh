#!/usr/bin/env bash
# Rebuilds models/fabrics/*.json (the collective presets `predict --gpus` and `scale`
# use by default, docs/comm.md "Fabric presets") from committed data only:
#   - datasets/gpus/{aiconfigurator,vidur}: public NCCL collective timings (2-8 GPUs of
#     one system each; Vidur's A100 DGX pair also across 2 nodes)
#   - datasets/gpus/fabrics.json: which campaigns fit which preset, each system's link
#     and NIC bandwidth with its source, and the presets derived from the link alone
# and scores them leave-one-GPU-out (docs/results/gpus/fabrics.md).
#
#   scripts/build_fabrics.sh [--check]
# --check rebuilds into a temporary folder and compares it with the committed presets
# (exit 1 when a file differs).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
[ -x "$BIN" ] || { echo "scaledl: error: $BIN not built (run scripts/setup.sh)" >&2; exit 1; }
OUT=models/fabrics
WORK=out/fabrics
if [ "${1:-}" = "--check" ]; then OUT=$WORK/check; rm -rf "$OUT"; fi
mkdir -p "$WORK"
rm -f "$WORK/collectives.sqlite" "$WORK/collectives.sqlite-wal" "$WORK/collectives.sqlite-shm"
for s in aiconfigurator vidur; do
  "$BIN" import "$s" --root "datasets/gpus/$s" --db "$WORK/collectives.sqlite" > "$WORK/import-$s.txt"
done
"$BIN" comm presets --db "$WORK/collectives.sqlite" --defs datasets/gpus/fabrics.json --out "$OUT" \
  --loo "$WORK/loo.csv" | tee "$WORK/presets.txt"
if [ "${1:-}" = "--check" ]; then
  if diff -r -x README.md models/fabrics "$OUT" > "$WORK/check.diff"; then
    echo "models/fabrics: rebuilt byte for byte"
  else
    echo "scaledl: error: models/fabrics differs from a rebuild (see $WORK/check.diff)" >&2
    exit 1
  fi
fi
