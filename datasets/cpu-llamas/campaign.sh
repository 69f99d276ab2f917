#!/usr/bin/env bash
# The Llama-family model_types that no campaign had measured (Mistral, Qwen2, Qwen3, Gemma,
# Gemma 2, Gemma 3, Phi-3, Mixtral, Qwen3-MoE; make_plan.py), timed on this CPU machine,
# with every 4th config of cpu-v2's layer plan for calibration (layers.json), in one store,
# one thread for LibTorch and OpenBLAS alike, with cpu-intel's timing options. Resumable.
#
#   BUILD_DIR=build CPU=1 datasets/cpu-llamas/campaign.sh [layers|models|all]
#
# Another dataset of this kind runs it from its own folder (DATASET=datasets/cpu-deepseek: its
# make_plan.py, probe, store NAME.sqlite and campaigns NAME-layers / NAME-models; LAYERS: the
# layer plan, default this folder's layers.json).
set -euo pipefail
LAYERS=$(realpath "${LAYERS:-$(dirname "$0")/layers.json}")
BIN=$(realpath "${BUILD_DIR:-$(dirname "$0")/../../build}")/tools/scaledl  # BUILD_DIR: from where it is run
cd "${DATASET:-$(dirname "$0")}"
NAME=$(basename "$PWD")
DB=$NAME.sqlite
STEP=${1:-all}
PIN=()
[ -n "${CPU:-}" ] && PIN=(taskset -c "$CPU")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
T0=$(date +%s)
if [ "$STEP" = layers ] || [ "$STEP" = all ]; then
  [ -s probe.json ] || "${PIN[@]}" "$BIN" probe --device cpu --threads 1 --db "$DB" --json > probe.json
  "${PIN[@]}" "$BIN" bench layers --plan "$LAYERS" --db "$DB" --device cpu --threads 1 \
    --campaign "$NAME-layers" --warmup 3 --repeats 10 --quiet
  echo "layers done: $(( $(date +%s) - T0 )) s"
fi
if [ "$STEP" = models ] || [ "$STEP" = all ]; then
  [ -s models.json ] || python3 make_plan.py > models.json
  "${PIN[@]}" "$BIN" bench models --plan models.json --db "$DB" --device cpu --threads 1 \
    --campaign "$NAME-models" --warmup 2 --warmup-extra 4 --repeats 5 --probe-repeats 1 --max-seconds 6 --quiet
fi
echo "campaign.sh $STEP: $(( $(date +%s) - T0 )) s wall"
"$BIN" db info --db "$DB"
python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()" "$DB"
