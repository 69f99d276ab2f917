#!/usr/bin/env bash
# What our H100 and H200 operator sets (datasets/{h100,h200}/neusight-ops) do to the
# end-to-end predictions when they join the training data (docs/unseen-gpu.md,
# "Operators on the H100 and H200"), into docs/results/unseen-gpu/hopper-ops/:
#   - leave one NeuSight GPU out (the issue's protocol, 3 seeds), training on the other
#     four plus: nothing | the H100 set | the H100 set's rows of 50 us or more | both sets;
#   - the H200 test set (scripts/reproduce/eval_h200.py, spec sheet and probe record) with bundles
#     trained like the default one plus: the H100 set (the H200 still unseen) | both sets
#     (the H200's own operators: how much error is left when the operators are known);
#   - leave one GPU out over NeuSight's five and our H100 campaign (datasets/h100/h100.sqlite,
#     BF16 train-mode runs of the LibTorch zoo), 1 seed: the H100 held out is a BF16 training
#     job on a GPU whose BF16 and backward rows are then in no training data.
#   scripts/studies/hopper_ops_study.sh          (~18 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
OUT=docs/results/unseen-gpu/hopper-ops
WORK=out/hopper-ops
mkdir -p "$OUT" "$WORK"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
store() {  # store NAME [root campaign]...: NeuSight's five GPUs plus the given operator sets
  local db="$WORK/$1.sqlite"; shift
  rm -f "$db" "$db-wal" "$db-shm"
  "$BIN" import neusight --root datasets/neusight --db "$db" > /dev/null
  while [ $# -gt 0 ]; do "$BIN" import neusight --root "$1" --db "$db" --campaign "$2" > /dev/null; shift 2; done
}
store ns
store h100 datasets/h100/neusight-ops h100-ops
store h100-above50us datasets/h100/neusight-ops h100-ops
sqlite3 "$WORK/h100-above50us.sqlite" "delete from layers where campaign = 'h100-ops' and fwd_median_ms < 0.05"
store both datasets/h100/neusight-ops h100-ops datasets/h200/neusight-ops h200-ops
for s in h100 h100-above50us both; do
  "$BIN" eval --db "$WORK/$s.sqlite" --protocol leave-one-device-out --methods sum,scaledl-tc --seeds 3 \
    --transfer-features --arch-features --no-device-features --anchors 1 --out "$OUT/logo-$s" --quiet
done
for s in h100 both; do
  "$BIN" train --db "$WORK/$s.sqlite" --db datasets/h100/h100.sqlite --out "$WORK/bundle-$s" \
    --transfer-features --arch-features --no-device-features --threads 1 --nthread 1 --seed 0 --reproducible > "$WORK/train-$s.txt"
  python3 scripts/reproduce/eval_h200.py --bundle "$WORK/bundle-$s" --no-anchors --out "$OUT/h200-$s" > /dev/null
done
"$BIN" eval --db "$WORK/ns.sqlite" --db datasets/h100/h100.sqlite --protocol leave-one-device-out \
  --methods sum,scaledl-tc --seeds 1 --transfer-features --arch-features --no-device-features --out "$OUT/logo-with-h100-campaign" --quiet
python3 scripts/reproduce/unseen_gpu_tables.py e2e "$OUT/logo-with-h100-campaign" > "$OUT/logo-with-h100-campaign/tables.md"
python3 scripts/reproduce/unseen_gpu_tables.py e2e "$OUT"/logo-h100 "$OUT"/logo-h100-above50us "$OUT"/logo-both > "$OUT/logo-tables.md"
echo "wrote $OUT"
