#!/usr/bin/env bash
# The cpu-v2 campaign (README.md here): D-optimal plans, then the device probe,
# the layer plan and every model plan, all on this machine, in one store, one
# thread for LibTorch and OpenBLAS alike. Then the Fig. 4 sweep (same store,
# its own campaign name). Resumable: re-running skips what the store already
# holds (plans are only written when missing).
#
#   BUILD_DIR=build datasets/cpu-v2/campaign.sh [plans|layers|models|sweep|all]
set -euo pipefail
cd "$(dirname "$0")"
BIN=$(realpath "${BUILD_DIR:-../../build}")/tools/scaledl
DB=cpu-v2.sqlite
STEP=${1:-all}
T0=$(date +%s)
MODEL_TIMING="--warmup 2 --warmup-extra 4 --repeats 5 --probe-repeats 1 --max-seconds 6 --quiet"

plan() {  # family budget
  [ -s "plans/$1.json" ] || "$BIN" plan --space "spaces/$1.json" --budget "$2" --seed 1 --out "plans/$1.json"
}
if [ "$STEP" = plans ] || [ "$STEP" = all ]; then
  python3 make-spaces.py
  for f in bert gpt2 t5 vit deit; do plan "$f" 200; done
  for f in llama opt gptneo; do plan "$f" 50; done
  [ -s plans/layers.json ] || "$BIN" plan --space spaces/layers.json --budget 800 --seed 1 --out plans/layers.json
  # One model plan, families interleaved, so that a stopped campaign still has every family.
  [ -s plans/models.json ] || python3 interleave.py plans/{bert,gpt2,t5,vit,deit,llama,opt,gptneo}.json > plans/models.json
fi
if [ "$STEP" = layers ] || [ "$STEP" = all ]; then
  # The device record of the whole campaign, measured at its thread count before anything else.
  "$BIN" probe --device cpu --threads 1 --db "$DB" --json > probe.json
  "$BIN" bench layers --plan plans/layers.json --db "$DB" --device cpu --threads 1 --campaign cpu-v2-layers \
    --warmup 3 --repeats 10 --quiet
fi
if [ "$STEP" = models ] || [ "$STEP" = all ]; then
  "$BIN" bench models --plan plans/models.json --db "$DB" --device cpu --threads 1 --campaign cpu-v2-models $MODEL_TIMING
fi
if [ "$STEP" = sweep ] || [ "$STEP" = all ]; then
  "$BIN" bench models --plan plans/sweep.json --db "$DB" --device cpu --threads 1 --campaign cpu-v2-sweep $MODEL_TIMING
fi
echo "campaign.sh $STEP: $(( $(date +%s) - T0 )) s wall"
"$BIN" db info --db "$DB"
# Fold the WAL into the file so that a committed store is one file.
for d in "$DB"; do
  python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()" "$d"
done
