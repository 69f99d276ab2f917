#!/usr/bin/env bash
# Issue #15, host input pipeline: measured vs predicted input throughput for
# W = 1..2 worker threads on this machine (and W = 3, one more than the 2 vCPUs
# of the project's VM, to check the plateau), then what `predict --workers` and
# `scale --workers` make of it. Writes docs/results/pipeline/:
#   calibration.json / .txt  run 1: W = 1..2, the fit (R1, alpha), storage read rate
#   check-K.json / .txt      runs 2..4, independent: W = 1..3, compared with run 1's prediction
#   predict.txt, scale.txt   the bottleneck with this machine's pipeline and GPU spec sheets
#   report.md                the tables, the commands and the machine
#
#   scripts/reproduce/pipeline_check.sh [--scaledl build/tools/scaledl] [--read-mb 256]
# About 2.5 minutes on the 2-core VM. Needs a built scaledl; nothing else (no python).
set -euo pipefail
cd "$(dirname "$0")/../.."

SCALEDL=build/tools/scaledl
READ_MB=256
while [ $# -gt 0 ]; do
  case "$1" in
    --scaledl) SCALEDL="$2"; shift ;;
    --read-mb) READ_MB="$2"; shift ;;
    *) echo "pipeline_check.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

OUT=docs/results/pipeline
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# A dataset-sized file for the storage read rate: written, flushed, then
# dropped from the page cache by the benchmark itself before each read.
dd if=/dev/urandom of="$TMP/shard.bin" bs=1M count="$READ_MB" status=none
sync "$TMP/shard.bin"

CPU=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
NPROC=$(nproc)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
DATE=$(date -u +%Y-%m-%d)

CAL="$SCALEDL bench pipeline --workers 2 --repeats 7 --repeat-s 0.5 --path $TMP/shard.bin --out $OUT/calibration.json"
CHECKS=3
$CAL > "$OUT/calibration.txt"
for k in $(seq 1 $CHECKS); do
  date -u +%H:%M:%S > "$OUT/check-$k.time"
  $SCALEDL bench pipeline --workers 3 --repeats 7 --repeat-s 0.5 --seed "$k" --check "$OUT/calibration.json" \
    --out "$OUT/check-$k.json" > "$OUT/check-$k.txt"
done
CHK="$SCALEDL bench pipeline --workers 3 --repeats 7 --repeat-s 0.5 --seed K --check $OUT/calibration.json --out $OUT/check-K.json"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# What the predictor does with this machine's pipeline (2 workers = the 2 vCPUs).
B="--bundle models/bundles/default --device-spec models/devices/h100-sxm.json --pipeline $OUT/calibration.json"
{
  echo "\$ scaledl predict models/deit-tiny.json --batch 256 $B --workers 2"
  $SCALEDL predict models/deit-tiny.json --batch 256 $B --workers 2
  echo
  echo "\$ scaledl predict models/vit-large.json --batch 256 $B --workers 2"
  $SCALEDL predict models/vit-large.json --batch 256 $B --workers 2
  echo
  echo "\$ scaledl predict models/gpt2.json --batch 16 --seq 1024 $B --workers 2"
  $SCALEDL predict models/gpt2.json --batch 16 --seq 1024 $B --workers 2
} > "$OUT/predict.txt"
printf '{"bandwidth_Bps": 2.27e11, "gamma_s": 5.6e-6}\n' > "$TMP/comm.json"  # docs/parallel.md's A100 fit, rounded
{
  echo "\$ scaledl scale models/vit-base.json --batch 256 --gpus 1..8 --comm comm.json $B --workers 2"
  $SCALEDL scale models/vit-base.json --batch 256 --gpus 1..8 --comm "$TMP/comm.json" $B --workers 2
  echo
  echo "\$ scaledl scale models/vit-base.json --batch 256 --gpus 1..8 --comm comm.json $B --workers 16 --vcpus 16"
  $SCALEDL scale models/vit-base.json --batch 256 --gpus 1..8 --comm "$TMP/comm.json" $B --workers 16 --vcpus 16
} > "$OUT/scale.txt"

{
  echo "# Host input pipeline: measured vs predicted (issue #15)"
  echo
  echo "Machine: \`$CPU\` (/proc/cpuinfo model name), $NPROC vCPUs (nproc); $DATE (UTC)."
  echo "Load average before / after the runs: $LOAD_BEFORE / $LOAD_AFTER (/proc/loadavg)."
  echo "Written by \`scripts/reproduce/pipeline_check.sh\`; method in docs/pipeline.md."
  echo
  echo "Run 1, the calibration (W = 1, 2; the fit of R1 and alpha):"
  echo
  echo "    ${CAL//$TMP/\$TMP}"
  echo
  echo '```'
  cat "$OUT/calibration.txt"
  echo '```'
  echo
  echo "Runs 2..$((CHECKS + 1)), independent measurements (seed K = 1..$CHECKS, W = 1..3), each against run 1's"
  echo "prediction (\`predicted\`: the USL fit of run 1 at min(W, vCPUs); \`linear\`: W x R1 of run 1, no"
  echo "contention; error = (predicted - measured) / measured; \`speedup\`: samples/s over the same run's W = 1,"
  echo "against the model's R(W) / R(1), which leaves out what moves every W of a run alike):"
  echo
  echo "    ${CHK//$TMP/\$TMP}"
  for k in $(seq 1 $CHECKS); do
    echo
    echo "Check $k, started $(cat "$OUT/check-$k.time") UTC:"
    echo
    sed -n '/^| kind/,/^$/p' "$OUT/check-$k.txt" | sed '/^$/d'
  done
  echo
  echo "Mean |error| over the $CHECKS checks, per kind and W:"
  echo
  echo "| kind | workers | samples/s, USL fit | samples/s, linear | speedup over W = 1, USL fit |"
  echo "|---|---|---|---|---|"
  cat "$OUT"/check-*.txt | awk -F'|' '/^\| (text|image) /{k=$2"|"$3; e=$7+0; d=$10+0; l=$12+0;
      s[k]+=(e<0?-e:e); u[k]+=(d<0?-d:d); t[k]+=(l<0?-l:l); n[k]++; if(!(k in o)){o[k]=++m; key[m]=k}}
      END{for(i=1;i<=m;i++){k=key[i]; printf "|%s| %.1f %% | %.1f %% | %.1f %% |\n", k, s[k]/n[k], t[k]/n[k], u[k]/n[k]}}'
  echo
  echo "The first check's own measurements (\`foreign\`: vCPUs other processes of this machine used meanwhile):"
  echo
  echo '```'
  sed '/^check against/,$d' "$OUT/check-1.txt"
  echo '```'
  echo
  echo "The predictor with this machine's pipeline measurements (\`predict.txt\`, \`scale.txt\`):"
  echo
  echo '```'
  grep -E '^\$|^model|^T_iter|^input|^T_input|^bottleneck' "$OUT/predict.txt"
  echo '```'
  echo
  echo '```'
  grep -vE '^(memory|not feasible)' "$OUT/scale.txt"
  echo '```'
} > "$OUT/report.md"
echo "wrote $OUT/report.md"
