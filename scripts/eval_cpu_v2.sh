#!/usr/bin/env bash
# The four protocols of docs/eval.md on the committed cpu-v2 campaign, written
# to docs/results/cpu-v2/<protocol>/ (docs/results/cpu-v2/README.md).
#
#   scripts/eval_cpu_v2.sh [id|ood-family|ood-size|cross-device ...]   (default: all)
#
# Each protocol runs single-threaded; two at a time fit the 2-core VM:
#   scripts/eval_cpu_v2.sh id ood-size & scripts/eval_cpu_v2.sh ood-family cross-device
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}/tools/scaledl
D=datasets/cpu-v2
OUT=docs/results/cpu-v2
COMMON="--epochs 150 --patience 40 --birnn-epochs 20 --mlp-epochs 60 --threads 1 --sweep-campaign cpu-v2-sweep"
run() {  # name protocol seeds [extra...]
  local name=$1 protocol=$2 seeds=$3
  shift 3
  mkdir -p "$OUT/$name"
  /usr/bin/time -f "%e s wall" "$B" eval --db "$D/cpu-v2.sqlite" --protocol "$protocol" --seeds "$seeds" $COMMON \
    --out "$OUT/$name" "$@" 2> "$OUT/$name/log.txt"
}
for p in "${@:-id ood-family ood-size cross-device}"; do
  for q in $p; do
    case $q in
      id) run id id 3 ;;
      ood-size) run ood-size ood-size 3 ;;
      ood-family) run ood-family ood-family 1 ;;
      # Another VM of the same kind (the first CPU campaign, 2026-11-22): another
      # host, its model runs' BLAS on 2 threads (datasets/cpu/README-models.md).
      cross-device) run cross-device cross-device 1 --test-db datasets/cpu/models.sqlite ;;
      *) echo "eval_cpu_v2.sh: unknown protocol '$q'" >&2; exit 2 ;;
    esac
  done
done
