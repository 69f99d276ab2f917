#!/usr/bin/env bash
# Layer models trained on isolated layer rows only ("iso") vs isolated rows plus
# the per-node times measured inside the model runs ("inmodel"), per seed:
#   (a) per-node error on in-model node times of held-out model runs (5-fold
#       group CV over runs: a run's nodes are never in train and test), and the
#       T_sum of the held-out runs from the same folds;
#   (b) graph refinement: `train graph --folds 5` CV MRE before/after on top of
#       each variant's layer model (trained on all rows of the variant). For
#       "inmodel" that layer model saw the test runs' node times (optimistic), so
#       also the nested CV (--cv-layer-db: layer models retrained per fold
#       without the test fold's node times; graph_cv.hpp), and the same with
#       cross-fitted training graphs (--cv-layer-cross-fit; "xfit").
# Prints one line per seed and variant, then the means. Used for docs/learn.md.
#
#   scripts/studies/in_model_study.sh LAYER_DB MODEL_DB OUT_DIR [SEEDS]
#   e.g. scripts/studies/in_model_study.sh datasets/h100/h100.sqlite datasets/h100/h100.sqlite out/inmodel-h100 5
# SCALEDL (default build/tools/scaledl) names the binary; EXTRA adds options to
# `train layers` (e.g. EXTRA="--min-rows 2").
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 LAYER_DB MODEL_DB OUT_DIR [SEEDS]" >&2; exit 2; }
LAYER_DB=$1 MODEL_DB=$2 OUT=$3 SEEDS=${4:-5}
B=${SCALEDL:-build/tools/scaledl}
EXTRA=${EXTRA:-}
mkdir -p "$OUT"
for ((seed = 0; seed < SEEDS; ++seed)); do
  for v in iso inmodel; do
    only=""
    [[ $v == iso ]] && only="--in-model-eval-only"
    # shellcheck disable=SC2086
    "$B" train layers --db "$LAYER_DB" --in-model-db "$MODEL_DB" --cv-holdout model-runs $only $EXTRA \
      --folds 5 --methods xgboost --nthread 1 --seed "$seed" --json --out "$OUT/layers-$v-$seed" \
      >"$OUT/layers-$v-$seed.json"
    a=$(jq -r '[(.cv[] | select(.type=="all") | "\(.direction)=\(.mre_pct*100|round/100)%/\(.rmse_ms*1000|round/1000)ms")]
               | join(" ")' "$OUT/layers-$v-$seed.json")
    t=$(jq -r '"tsum_vs_iter=\(.run_sum_cv.mre_iter*10000|round/100)% tsum_vs_nodesum=\(.run_sum_cv.mre_node_sum*10000|round/100)%"' \
      "$OUT/layers-$v-$seed.json")
    nested=""
    [[ $v == inmodel ]] && nested="--cv-layer-db $LAYER_DB"
    # shellcheck disable=SC2086
    g=$("$B" train graph --db "$MODEL_DB" --layers "$OUT/layers-$v-$seed" --seed "$seed" --folds 5 $nested \
          --out "$OUT/graph-$v-$seed" |
        awk '/^CV_MRE_%/ {printf "graph_before=%s%% graph_after=%s%%", $3, $5}
             /^NESTED_CV_MRE_%/ {printf " nested_before=%s%% nested_after=%s%%", $3, $5}')
    if [[ $v == inmodel ]]; then
      g+=$("$B" train graph --db "$MODEL_DB" --layers "$OUT/layers-$v-$seed" --seed "$seed" --folds 5 $nested \
             --cv-layer-cross-fit --out "$OUT/graph-$v-xfit-$seed" |
           awk '/^NESTED_CV_MRE_%/ {printf " xfit_after=%s%%", $5}')
    fi
    echo "$v seed=$seed $a $t $g"
  done
done | tee "$OUT/runs.txt"
echo "== mean over seeds"
awk '{n[$1]++; for (i = 3; i <= NF; ++i) { split($i, kv, "="); split(kv[2], x, "%"); s[$1" "kv[1]] += x[1] } }
     END {for (k in s) { split(k, p, " "); printf "%-8s %-16s %7.2f %%\n", p[1], p[2], s[k]/n[p[1]] } }' \
  "$OUT/runs.txt" | sort
