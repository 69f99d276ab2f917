#!/usr/bin/env bash
# The cross-device protocol on a second machine (docs/results/cpu-intel/README.md):
# train on the cpu-v2 stores (AMD host), test on datasets/cpu-intel (Intel host),
#   without       the layer models know the AMD host's layer rows only;
#   test-layers   they also train on the Intel host's layer rows (--test-layers:
#                 a layer campaign on the new machine, never its model runs).
#
#   scripts/eval_cpu_intel.sh [without|test-layers ...]   (default: both)
# Environment: SEEDS (3), METHODS (sum,scaledl-tc,dnnperf,prenet), BUILD_DIR or SCALEDL.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SCALEDL:-${BUILD_DIR:-build}/tools/scaledl}
OUT=docs/results/cpu-intel
ARGS=(--db datasets/cpu-v2/cpu-v2.sqlite --db datasets/cpu-v2/cpu-v2-rest.sqlite
      --protocol cross-device --test-db datasets/cpu-intel/cpu-intel.sqlite
      --seeds "${SEEDS:-3}" --methods "${METHODS:-sum,scaledl-tc,dnnperf,prenet}"
      --epochs 150 --patience 40 --birnn-epochs 20 --mlp-epochs 60 --threads 1
      --sweep-campaign cpu-v2-sweep --in-model --quiet)
[ $# -gt 0 ] || set -- without test-layers
for v in "$@"; do
  t0=$SECONDS
  case $v in
    without) "$B" eval "${ARGS[@]}" --out "$OUT/without" ;;
    test-layers) "$B" eval "${ARGS[@]}" --test-layers --out "$OUT/test-layers" ;;
    *) echo "eval_cpu_intel.sh: unknown variant '$v' (without, test-layers)" >&2; exit 2 ;;
  esac
  gzip -9nf "$OUT/$v/predictions.csv"  # committed gzipped (the GPU tool's 64 MiB working-tree limit)
  echo "$v: $((SECONDS - t0)) s"
done
