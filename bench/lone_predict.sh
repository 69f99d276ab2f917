#!/usr/bin/env bash
# Wall time of a lone `scaledl predict` process (start-up, bundle load, one prediction),
# the default bundle's main job: GPT-2 large, batch 4 x 1,024 tokens, fwd-bwd, H100 SXM
# spec sheet. Prints each run and the median (docs/predict.md, "Speed").
#   bench/lone_predict.sh [BIN] [RUNS]      (default build/tools/scaledl, 5 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/tools/scaledl}
RUNS=${2:-5}
T=()
for _ in $(seq "$RUNS"); do
  t=$( { /usr/bin/time -f "%e" "$BIN" predict --bundle models/bundles/default models/gpt2-large.json --batch 4 \
        --seq 1024 --device-spec models/devices/h100-sxm.json --mode fwd-bwd > /dev/null; } 2>&1 | tail -1)
  T+=("$t")
done
printf '%s\n' "${T[@]}" | sort -n | awk -v bin="$BIN" '{a[NR]=$1} END {printf "%s: %d runs, %s s .. %s s, median %s s\n", bin, NR, a[1], a[NR], a[int((NR+1)/2)]}'
