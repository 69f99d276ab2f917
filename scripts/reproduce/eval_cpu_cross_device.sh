#!/usr/bin/env bash
# The cross-device protocol on another CPU machine: train on the cpu-v2 stores (AMD
# Zen 5 host), test on datasets/$TEST ($TEST.sqlite: a campaign of the same plans on
# another machine, datasets/cpu-intel/campaign.sh), into docs/results/$TEST/:
#   without       the layer models know the AMD host's layer rows only; the test
#                 machine is known by its probe record;
#   test-layers   they also train on the test machine's layer rows (--test-layers:
#                 a layer campaign on the new machine, never its model runs);
#   two-machines  as `without`, with cpu-intel's layer rows and runs in training too
#                 (two training machines; TEST other than cpu-intel);
#   calibrated    as `without`, the test machine's layer times calibrated by K (16) of
#                 its layer rows per kind (--calibrate-rows; `predict --calibrate`).
#
#   TEST=cpu-zen4 scripts/reproduce/eval_cpu_cross_device.sh [without|test-layers|two-machines ...]
# Environment: TEST (cpu-intel), SEEDS (3), METHODS (sum,scaledl-tc,dnnperf,prenet), K (16),
# BUILD_DIR or SCALEDL. Default variants: without and test-layers.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${SCALEDL:-${BUILD_DIR:-build}/tools/scaledl}
TEST=${TEST:-cpu-intel}
OUT=docs/results/$TEST
ARGS=(--db datasets/cpu-v2/cpu-v2.sqlite --db datasets/cpu-v2/cpu-v2-rest.sqlite
      --protocol cross-device --test-db "datasets/$TEST/$TEST.sqlite"
      --seeds "${SEEDS:-3}" --methods "${METHODS:-sum,scaledl-tc,dnnperf,prenet}"
      --epochs 150 --patience 40 --birnn-epochs 20 --mlp-epochs 60 --threads 1
      --sweep-campaign cpu-v2-sweep --in-model --quiet)
[ $# -gt 0 ] || set -- without test-layers
for v in "$@"; do
  t0=$SECONDS
  case $v in
    without) "$B" eval "${ARGS[@]}" --out "$OUT/without" ;;
    test-layers) "$B" eval "${ARGS[@]}" --test-layers --out "$OUT/test-layers" ;;
    two-machines) "$B" eval "${ARGS[@]}" --db datasets/cpu-intel/cpu-intel.sqlite --out "$OUT/two-machines" ;;
    calibrated) "$B" eval "${ARGS[@]}" --calibrate-rows "${K:-16}" --out "$OUT/calibrated" ;;
    *) echo "eval_cpu_cross_device.sh: unknown variant '$v' (without, test-layers, two-machines, calibrated)" >&2
       exit 2 ;;
  esac
  gzip -9nf "$OUT/$v/predictions.csv"  # committed gzipped (the GPU tool's 64 MiB working-tree limit)
  echo "$v: $((SECONDS - t0)) s"
done
