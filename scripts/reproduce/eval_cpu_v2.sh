#!/usr/bin/env bash
# The four protocols of docs/eval.md on the committed cpu-v2 campaign
# (docs/results/cpu-v2/README.md).
#
#   scripts/reproduce/eval_cpu_v2.sh [id|ood-family|ood-size|cross-device ...]   (default: all)
#
# VARIANT=after-12 (default): both stores (all 1,150 planned runs), 5 seeds
#   every protocol, layer models with the training runs' in-model node times
#   (cross-fitted), intervals; written to docs/results/cpu-v2/after-12/<protocol>/
#   (3 seeds for cross-device).
# VARIANT=before: what produced docs/results/cpu-v2/<protocol>/ before issue #12
#   (first store only, 3 seeds id/ood-size, 1 seed ood-family/cross-device;
#   run with the binary of commit 6f5334d).
#
# Each protocol runs single-threaded; two at a time fit the 2-core VM:
#   scripts/reproduce/eval_cpu_v2.sh id ood-size & scripts/reproduce/eval_cpu_v2.sh ood-family-core cross-device
# (what ran for docs/results/cpu-v2/after-12/; ood-family-all was not run there: time)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${SCALEDL:-${BUILD_DIR:-build}/tools/scaledl}
D=datasets/cpu-v2
VARIANT=${VARIANT:-after-12}
COMMON="--epochs 150 --patience 40 --birnn-epochs 20 --mlp-epochs 60 --threads 1 --sweep-campaign cpu-v2-sweep"
if [ "$VARIANT" = before ]; then
  OUT=docs/results/cpu-v2
  STORES="--db $D/cpu-v2.sqlite"
  S_ID=3 S_SIZE=3 S_FAM=1 S_DEV=1
else
  OUT=docs/results/cpu-v2/$VARIANT
  STORES="--db $D/cpu-v2.sqlite --db $D/cpu-v2-rest.sqlite"
  COMMON="$COMMON --in-model"
  S_ID=5 S_SIZE=5 S_FAM=5 S_DEV=3  # cross-device: 3 seeds (time; see docs/results/cpu-v2/README.md)
fi
run() {  # name protocol seeds [extra...]
  local name=$1 protocol=$2 seeds=$3
  shift 3
  mkdir -p "$OUT/$name"
  /usr/bin/time -f "%e s wall" "$B" eval $STORES --protocol "$protocol" --seeds "$seeds" $COMMON \
    --out "$OUT/$name" "$@" 2> "$OUT/$name/log.txt"
  # committed gzipped: the repository stays under the GPU tool's 64 MiB working-tree limit
  gzip -9nf "$OUT/$name/predictions.csv"
}
for p in "${@:-id ood-family ood-size cross-device}"; do
  for q in $p; do
    case $q in
      id) run id id $S_ID ;;
      ood-size) run ood-size ood-size $S_SIZE ;;
      ood-family) run ood-family ood-family $S_FAM ;;
      # ood-family trains every method 8 times per seed (about 40 min a seed here):
      # the ScaleDL methods and the sum over 5 seeds, every method over 1.
      ood-family-core) run ood-family ood-family $S_FAM --methods sum,scaledl-tc,scaledl-anee ;;
      ood-family-all) run ood-family-all ood-family 1 ;;
      # Another VM of the same kind (the first CPU campaign, 2026-11-22): another
      # host, its model runs' BLAS on 2 threads (datasets/cpu/README-models.md).
      cross-device) run cross-device cross-device $S_DEV --test-db datasets/cpu/models.sqlite ;;
      *) echo "eval_cpu_v2.sh: unknown protocol '$q'" >&2; exit 2 ;;
    esac
  done
done
