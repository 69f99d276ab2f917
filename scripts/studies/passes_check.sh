#!/usr/bin/env bash
# Does `bench layers --passes 3` repeat better than one pass? (docs/bench.md, "Several
# passes".) Every 4th config of cpu-v2's layer plan (200 configs), timed four times on
# this machine, interleaved: one pass (one-a), three passes (three-a), one pass (one-b),
# three passes (three-b); pinned to the last CPU, one thread, the CPU campaigns' timing
# options. Then scripts/studies/passes_repeat.py compares one-a with one-b and three-a with three-b.
#   scripts/studies/passes_check.sh OUT_DIR        (~9 min on the 2-vCPU VM; keep the machine idle)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
OUT=${1:?usage: scripts/studies/passes_check.sh OUT_DIR}
mkdir -p "$OUT"
DB="$OUT/passes.sqlite"
rm -f "$DB" "$DB-wal" "$DB-shm"
python3 -c "
import json, sys
p = json.load(open('datasets/cpu-v2/plans/layers.json'))
p['configs'] = p['configs'][::4]
json.dump(p, open(sys.argv[1], 'w'))" "$OUT/plan.json"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
CPU=$(( $(nproc) - 1 ))
PIN=(taskset -c "$CPU")
lscpu | grep -E "Model name|^CPU family|^Model:" > "$OUT/cpu.txt"
"${PIN[@]}" "$BIN" probe --device cpu --threads 1 --db "$DB" --json > "$OUT/probe.json"
for c in "one-a 1" "three-a 3" "one-b 1" "three-b 3"; do
  set -- $c
  T0=$(date +%s)
  "${PIN[@]}" "$BIN" bench layers --plan "$OUT/plan.json" --db "$DB" --device cpu --threads 1 \
    --campaign "$1" --passes "$2" --warmup 3 --repeats 10 --quiet
  echo "$1: $(( $(date +%s) - T0 )) s, ended $(date -u +%H:%M:%S)"
done | tee "$OUT/times.txt"
python3 scripts/studies/passes_repeat.py "$DB" | tee "$OUT/repeat.md"
