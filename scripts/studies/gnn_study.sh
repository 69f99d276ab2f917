#!/usr/bin/env bash
# Measures graph-refinement choices by 5-fold cross-validation over model runs
# (scaledl train graph --folds 5), repeated over seeds (each seed = another fold
# assignment and initialisation): encoder x loss. Prints one line per run and
# the mean CV MRE per choice. Used for the tables in docs/gnn.md.
#
#   scripts/studies/gnn_study.sh LAYER_DB MODEL_DB OUT_DIR [SEEDS]
#   e.g. scripts/studies/gnn_study.sh datasets/cpu/layers.sqlite datasets/cpu/models.sqlite out/study-cpu 5
# SCALEDL (default build/tools/scaledl) names the binary.
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 LAYER_DB MODEL_DB OUT_DIR [SEEDS]" >&2; exit 2; }
LAYER_DB=$1 MODEL_DB=$2 OUT=$3 SEEDS=${4:-5}
B=${SCALEDL:-build/tools/scaledl}
mkdir -p "$OUT"
"$B" train layers --db "$LAYER_DB" --out "$OUT/layers" --folds 0 >/dev/null
for enc in transformerconv anee; do
  for loss in mse-log mre; do
    for ((seed = 0; seed < SEEDS; ++seed)); do
      line=$("$B" train graph --db "$MODEL_DB" --layers "$OUT/layers" --encoder "$enc" --loss "$loss" \
               --seed "$seed" --folds 5 --out "$OUT/graph-$enc-$loss-$seed" | grep '^CV_MRE_%')
      echo "$enc $loss seed=$seed $line"
    done
  done
done | tee "$OUT/runs.txt"
echo "== mean over seeds: CV MRE % after refinement (before = T_sum + T_comm)"
awk '{b[$1" "$2]+=$6; a[$1" "$2]+=$8; n[$1" "$2]++}
     END {for (k in n) printf "%-26s before %6.2f  after %6.2f  (%d seeds)\n", k, b[k]/n[k], a[k]/n[k], n[k]}' \
  "$OUT/runs.txt" | sort
