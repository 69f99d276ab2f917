#!/usr/bin/env bash
# How much of the leave-one-GPU-out error is transfer (docs/unseen-gpu.md): layer models
# trained on all five NeuSight GPUs' operators (the default bundle's options), then the
# plain sum for every single-GPU label of those GPUs, from each GPU's spec sheet. The
# same runs as scripts/reproduce/unseen_gpu.sh, with the GPU in the training data instead of out.
#   scripts/studies/in_distribution_sum.sh      (~2 min on 2 cores; needs out/unseen-gpu/ns.sqlite
#                                         from scripts/reproduce/unseen_gpu.sh, or imports it)
# LAYER_ARGS: the layer models' options (default: those of 2026-11-26, the committed CSV);
# CSV: where the table's rows go (default docs/results/unseen-gpu/in-distribution.csv).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
OUT=docs/results/unseen-gpu
WORK=out/unseen-gpu
mkdir -p "$OUT" "$WORK"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
[ -f "$WORK/ns.sqlite" ] || "$BIN" import neusight --root datasets/neusight --db "$WORK/ns.sqlite" > /dev/null
LAYER_ARGS=${LAYER_ARGS:---transfer-features --arch-features --no-device-features --kernel-time}
rm -rf "$WORK/layers-all5"
# shellcheck disable=SC2086  # LAYER_ARGS is a list of options
"$BIN" train layers --db "$WORK/ns.sqlite" --out "$WORK/layers-all5" $LAYER_ARGS > "$WORK/layers-all5.log"
CSV=${CSV:-$OUT/in-distribution.csv}
echo "gpu,model,mode,batch,seq,measured_ms,sum_ms" > "$CSV"
for dir in datasets/neusight/labels/*/; do
  gpu=$(basename "$dir")
  spec=datasets/neusight/device_configs/$gpu.json
  [ -f "$spec" ] || continue
  for f in "$dir"*.json; do
    b=$(basename "$f" .json)
    [[ $b =~ ^([a-z0-9_]+)-(inf|train)-([0-9]+)-([0-9]+)$ ]] || continue  # single-GPU eager labels only
    model=${BASH_REMATCH[1]} seq=${BASH_REMATCH[3]} batch=${BASH_REMATCH[4]}
    [ "${BASH_REMATCH[2]}" = inf ] && mode=inference || mode=fwd-bwd
    measured=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['e2e_latency'])" "$f")
    pred=$("$BIN" predict --layers "$WORK/layers-all5" --device-spec "$spec" --mode $mode --batch "$batch" \
      --seq "$seq" "datasets/neusight/model_configs/$model.json" --json |
      python3 -c "import json,sys; print(json.load(sys.stdin)['t_iter_ms'])")
    echo "$gpu,$model,$mode,$batch,$seq,$measured,$pred" >> "$CSV"
  done
done
python3 - "$CSV" <<'EOF'
import csv, collections, sys
rows = list(csv.DictReader(open(sys.argv[1])))
groups = collections.OrderedDict([("all", [])])
for r in rows:
    e = (float(r["sum_ms"]) - float(r["measured_ms"])) / float(r["measured_ms"]) * 100
    groups["all"].append(e)
    groups.setdefault(f"{r['gpu']} {r['mode']}", []).append(e)
    if r["model"] == "switchxl4":
        groups.setdefault("switchxl4 (all GPUs)", []).append(e)
print("| runs | n | MRE % | bias % |\n|---|---|---|---|")
for k, v in groups.items():
    print(f"| {k} | {len(v)} | {sum(abs(x) for x in v) / len(v):.1f} | {sum(v) / len(v):+.1f} |")
EOF
