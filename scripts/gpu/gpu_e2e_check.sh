#!/usr/bin/env bash
# One call on the lent GPU machine (device tool; docs/unseen-gpu.md, "An H200 test set"):
# Hugging Face end-to-end labels the NeuSight way (scripts/gpu/hf_e2e_bench.py, pinned to
# cores 0-3) while ScaleDL builds on cores 4-15; then the probe and the zoo plan
# datasets/h200/zoo-plan.json (the LibTorch zoo on the same configs), then the test
# suite, each step time-boxed so that the whole fits in DEADLINE_S seconds.
#   OUT=/tmp/out DEADLINE_S=560 scripts/gpu/gpu_e2e_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to the result folder}
DEADLINE_S=${DEADLINE_S:-560}
T0=$(date +%s); left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c 'import torch,transformers;print("torch",torch.__version__,"cuda",torch.version.cuda,"transformers",transformers.__version__)'
  lscpu | grep -E "Model name|^CPU\(s\)"; } 2>&1 | tee "$OUT/env.txt"
mkdir -p /tmp/gpulogs
( taskset -c 4-15 scripts/gpu/gpu_build.sh /tmp/gpulogs 12 > /tmp/gpulogs/build.out 2>&1; echo $? > /tmp/gpulogs/build.rc ) &
BUILD=$!
[ "${SKIP_HF:-0}" = 1 ] || PYTHONUNBUFFERED=1 taskset -c 0-3 timeout ${HF_S:-330} python3 scripts/gpu/hf_e2e_bench.py --out "$OUT/hf-e2e.csv" \
    --budget-s ${HF_BUDGET_S:-250} > "$OUT/hf.log" 2>&1
echo "hf_e2e_bench rc=$? at $(( $(date +%s) - T0 )) s: $(grep -c ',ok,' "$OUT/hf-e2e.csv") ok rows"
grep -v "^\[" "$OUT/hf.log" | grep -v -i warn | tail -5
wait $BUILD; cat /tmp/gpulogs/build.out; echo "build rc=$(cat /tmp/gpulogs/build.rc) at $(( $(date +%s) - T0 )) s"
[ "$(cat /tmp/gpulogs/build.rc)" = 0 ] || { tail -40 /tmp/gpulogs/build.log; exit 1; }
source .deps/gpu_env.sh; B=build-gpu/tools/scaledl
timeout 60 $B probe --device cuda --json --db "$OUT/h200.sqlite" > "$OUT/probe.json"; echo "probe rc=$?"
head -c 1500 "$OUT/probe.json"; echo
timeout $(( $(left) > 400 ? 100 : 60 )) $B bench models --plan datasets/h200/zoo-plan.json --db "$OUT/h200.sqlite" \
    --device cuda --campaign h200-zoo --warmup 3 --warmup-extra 0 --repeats 10 --probe-repeats 0 --quiet 2>&1 | tail -3
echo "zoo done at $(( $(date +%s) - T0 )) s"
CT=$(( $(left) - 15 )); echo "ctest with $CT s"
[ $CT -gt 30 ] && timeout $CT ctest --test-dir build-gpu -j 14 --timeout 120 --output-on-failure > "$OUT/ctest.log" 2>&1
echo "ctest rc=$?"; grep -E "tests passed|tests failed|\*\*\*|Failed|Timeout" "$OUT/ctest.log" | tail -25
echo "total $(( $(date +%s) - T0 )) s"
