#!/usr/bin/env bash
# A second CPU machine for the cross-device protocol (README.md here): the
# layer plan of cpu-v2 and every 6th config of each of its family plans, measured on
# this machine in one store, one thread for LibTorch and OpenBLAS alike, with
# the same timing options as cpu-v2. Resumable (the store's resume keys).
#
#   BUILD_DIR=build CPU=1 datasets/cpu-intel/campaign.sh [layers|models|all]
#
# CPU: the logical CPU the measurement is pinned to (taskset), so that other
# work can use the other one; unset = not pinned.
# Another machine, the same plans: NAME=cpu-zen4 (its store datasets/NAME/NAME.sqlite,
# probe.json there, campaigns NAME-layers / NAME-models); default cpu-intel.
# PASSES=N: the layer plan in N passes (`bench layers --passes N`, docs/bench.md); default 1.
set -euo pipefail
cd "$(dirname "$0")"
BIN=$(realpath "${BUILD_DIR:-../../build}")/tools/scaledl
NAME=${NAME:-cpu-intel}
MODELS_PLAN=$PWD/plans/models.json
mkdir -p "../$NAME"
cd "../$NAME"
DB=$NAME.sqlite
PLANS=../cpu-v2/plans
STEP=${1:-all}
PIN=()
[ -n "${CPU:-}" ] && PIN=(taskset -c "$CPU")
T0=$(date +%s)
MODEL_TIMING="--warmup 2 --warmup-extra 4 --repeats 5 --probe-repeats 1 --max-seconds 6 --quiet"
if [ "$STEP" = layers ] || [ "$STEP" = all ]; then
  # The device record of the whole campaign, measured at its thread count before anything else.
  [ -s probe.json ] || "${PIN[@]}" "$BIN" probe --device cpu --threads 1 --db "$DB" --json > probe.json
  "${PIN[@]}" "$BIN" bench layers --plan "$PLANS/layers.json" --db "$DB" --device cpu --threads 1 \
    --campaign "$NAME-layers" --warmup 3 --repeats 10 --passes "${PASSES:-1}" --quiet
  echo "layers done: $(( $(date +%s) - T0 )) s"
fi
if [ "$STEP" = models ] || [ "$STEP" = all ]; then
  [ -s "$MODELS_PLAN" ] || (cd ../cpu-intel && python3 subplan.py 6 > plans/models.json)
  "${PIN[@]}" "$BIN" bench models --plan "$MODELS_PLAN" --db "$DB" --device cpu --threads 1 \
    --campaign "$NAME-models" $MODEL_TIMING
fi
echo "campaign.sh $STEP: $(( $(date +%s) - T0 )) s wall"
"$BIN" db info --db "$DB"
# Fold the WAL into the file so that a committed store is one file.
python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()" "$DB"
