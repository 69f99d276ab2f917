#!/usr/bin/env bash
# Protocol `leave-one-device-out (bundle data and options)`: each of NeuSight's five GPUs held out
# end to end (40 FP32 runs), the layer models and the refinement trained on the default bundle's
# layer data (NeuSight, our H100 and H200 operator sets, the four public sources, our H200's
# training kernels; docs/gpu-data.md) with the default bundle's options (scripts/build_default_bundle.sh:
# --dtype-rates, --split-direction and --host-term included; 3 refinement members, --graph-members), the held-out GPU
# predicted from its spec sheet.
# Our H100 campaign (datasets/h100/h100.sqlite) is left out: its 50 runs would make a sixth fold.
#   scripts/reproduce/neusight_loo_bundle.sh [SEEDS] [OUT]   (default 3, docs/results/gpus/neusight-loo)
# ~150 s per seed on 2 cores. Writes OUT/report.md, report.json and predictions.csv (report.json is not
# committed: the two others hold its figures), and prints the
# MRE and mean signed error per held-out GPU. GPU_SOURCES (default "aiconfigurator kernelbench vidur
# deepbench") and H200_KINDS (default 1: our H200's training kernels) choose the data beyond
# NeuSight's and our H100 and H200 operator sets: GPU_SOURCES= H200_KINDS=0 is the data before #41.
# EVAL_ARGS: more `scaledl eval` options (e.g. --device-crossfit).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
SEEDS=${1:-3}
OUT=${2:-docs/results/gpus/neusight-loo}
WORK=out/neusight-loo/$(basename "$OUT")
mkdir -p "$OUT" "$WORK"
DB=$WORK/bundle-data.sqlite
rm -f "$DB" "$DB-wal" "$DB-shm"
{
  "$BIN" import neusight --root datasets/neusight --db "$DB"
  "$BIN" import neusight --root datasets/h100/neusight-ops --db "$DB" --campaign h100-ops
  "$BIN" import neusight --root datasets/h200/neusight-ops --db "$DB" --campaign h200-ops
  for s in ${GPU_SOURCES-aiconfigurator kernelbench vidur deepbench}; do
    "$BIN" import "$s" --root "datasets/gpus/$s" --db "$DB"
  done
  if [ "${H200_KINDS:-1}" = 1 ]; then
    "$BIN" import training-kinds --root datasets/h200/training-kinds --db "$DB"
  fi
} > "$WORK/imports.txt"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=1
# shellcheck disable=SC2086  # EVAL_ARGS is a list of options
"$BIN" eval --db "$DB" --protocol leave-one-device-out --methods sum,scaledl-tc --seeds "$SEEDS" \
  --transfer-features --arch-features --no-device-features --kernel-time --dtype-rates --sustained-bw --split-direction \
  --host-term --graph-members 3 --no-plots --quiet --out "$OUT" ${EVAL_ARGS:-}
python3 - "$OUT/predictions.csv" <<'EOF'
# Per held-out GPU and method: MRE % and mean signed error % (+ = predicted too slow).
import collections, csv, sys
errs = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    m, p = float(r["measured_ms"]), float(r["predicted_ms"])
    errs[(r["method"], r["device"].split(":", 1)[1])].append((p - m) / m * 100)
print("| method | held-out GPU | runs x seeds | MRE % | mean signed % |")
print("|---|---|---|---|---|")
for (method, gpu), e in sorted(errs.items()):
    print(f"| {method} | {gpu} | {len(e)} | {sum(map(abs, e)) / len(e):.1f} | {sum(e) / len(e):+.1f} |")
EOF
