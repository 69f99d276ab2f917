#!/usr/bin/env bash
# Sustained bandwidth (docs/unseen-gpu.md, "Sustained bandwidth"), on committed data only,
# into docs/results/unseen-gpu/sustained-bw/: the protocols of scripts/reproduce/unseen_gpu.sh with the
# layer models' memory-bound rooflines at each GPU's sustained bandwidth (--sustained-bw),
# once from the held-out GPU's spec sheet (the training GPUs' median share of its spec
# bandwidth) and once as if it had been probed (--probe-bandwidth: the bandwidth of its own
# largest elementwise rows, what `scaledl probe`'s copy measures; its other rows stay unseen).
#   scripts/reproduce/sustained_bw.sh [SEEDS]      (default 3; ~25 min on 2 cores)
# Needs the stores of scripts/reproduce/unseen_gpu.sh (out/unseen-gpu/{ns,ns-h100ops,ns7}.sqlite): it makes
# them when they are missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
SEEDS=${1:-3}
OUT=docs/results/unseen-gpu/sustained-bw
WORK=out/unseen-gpu
mkdir -p "$OUT" "$WORK"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if [ ! -f "$WORK/ns.sqlite" ]; then
  "$BIN" import neusight --root datasets/neusight --db "$WORK/ns.sqlite" > /dev/null
fi
if [ ! -f "$WORK/ns-h100ops.sqlite" ]; then
  "$BIN" import neusight --root datasets/neusight --db "$WORK/ns-h100ops.sqlite" > /dev/null
  "$BIN" import neusight --root datasets/h100/neusight-ops --db "$WORK/ns-h100ops.sqlite" --campaign h100-ops > /dev/null
fi
if [ ! -f "$WORK/ns7.sqlite" ]; then
  "$BIN" import neusight --root datasets/neusight --db "$WORK/ns7.sqlite" > /dev/null
  "$BIN" import neusight --root datasets/h200/neusight-ops --db "$WORK/ns7.sqlite" --campaign h200-ops > /dev/null
  "$BIN" import neusight --root datasets/h100/neusight-ops --db "$WORK/ns7.sqlite" --campaign h100-ops > /dev/null
fi
TRANSFER="--transfer-features --arch-features --no-device-features"
E2E="eval --db $WORK/ns-h100ops.sqlite --protocol leave-one-device-out --methods sum,scaledl-tc --seeds $SEEDS $TRANSFER --kernel-time --anchors 1 --no-plots --quiet"
# End to end (the issue's protocol, the default bundle's data): spec sheet, then probed.
"$BIN" $E2E --sustained-bw --out "$OUT/e2e-default"
"$BIN" $E2E --sustained-bw --device-crossfit --out "$OUT/e2e-device-crossfit"
"$BIN" $E2E --sustained-bw --probe-bandwidth --out "$OUT/e2e-default-probe"
"$BIN" $E2E --sustained-bw --probe-bandwidth --device-crossfit --out "$OUT/e2e-device-crossfit-probe"
# Per operator, with every held-out row's prediction (the CSVs the per-type tables below read).
OPS="eval layers --leave-one-out device --json --nthread 1 $TRANSFER"
for v in ns ns7; do
  "$BIN" $OPS --db "$WORK/$v.sqlite" --predictions "$WORK/$v-spec.csv" > "$OUT/ops-$v-spec.json"
  "$BIN" $OPS --db "$WORK/$v.sqlite" --sustained-bw --predictions "$WORK/$v-sbw.csv" > "$OUT/ops-$v-sustained.json"
  "$BIN" $OPS --db "$WORK/$v.sqlite" --sustained-bw --probe-bandwidth --predictions "$WORK/$v-probe.csv" \
    > "$OUT/ops-$v-probe.json"
done
python3 scripts/reproduce/unseen_gpu_tables.py e2e "$OUT/e2e-default" "$OUT/e2e-device-crossfit" "$OUT/e2e-default-probe" \
  "$OUT/e2e-device-crossfit-probe" > "$OUT/e2e-tables.md"
python3 scripts/reproduce/unseen_gpu_tables.py ops "five GPUs, spec sheet, as before=$OUT/ops-ns-spec.json" \
  "five GPUs, --sustained-bw, spec sheet=$OUT/ops-ns-sustained.json" \
  "five GPUs, --sustained-bw --probe-bandwidth=$OUT/ops-ns-probe.json" \
  "seven GPUs, spec sheet, as before=$OUT/ops-ns7-spec.json" \
  "seven GPUs, --sustained-bw, spec sheet=$OUT/ops-ns7-sustained.json" \
  "seven GPUs, --sustained-bw --probe-bandwidth=$OUT/ops-ns7-probe.json" > "$OUT/ops-tables.md"
python3 scripts/studies/ops_by_floor.py "five GPUs, spec sheet=$WORK/ns-spec.csv" "five GPUs, --sustained-bw=$WORK/ns-sbw.csv" \
  "five GPUs, --probe-bandwidth=$WORK/ns-probe.csv" "seven GPUs, spec sheet=$WORK/ns7-spec.csv" \
  "seven GPUs, --sustained-bw=$WORK/ns7-sbw.csv" "seven GPUs, --probe-bandwidth=$WORK/ns7-probe.csv" \
  > "$OUT/ops-by-floor.md"
echo "wrote $OUT"
