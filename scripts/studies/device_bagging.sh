#!/usr/bin/env bash
# Leave one GPU out per operator, with the layer models of the held-out GPU averaged
# over "bags" that each leave one more training GPU out (device bagging), against the
# plain protocol. An experiment (docs/unseen-gpu.md, "What limits the targets"); not
# an option of scaledl.
#   scripts/studies/device_bagging.sh STORE OUTDIR     (STORE: `scaledl import neusight` of datasets/neusight)
# ~2 min on the 2-core VM. Needs sqlite3 (Debian's sqlite3 package).
set -euo pipefail
store=${1:?STORE}; out=${2:?OUTDIR}
bin=${SCALEDL:-build/tools/scaledl}
mkdir -p "$out"
T=(--leave-one-out device --json --nthread 1 --transfer-features --arch-features --no-device-features --sustained-bw)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
"$bin" eval layers --db "$store" "${T[@]}" --predictions "$out/base.csv" > "$out/base.json"
sqlite3 "$store" "select distinct device from layers" | while read -r dev; do
  tag=$(echo "$dev" | tr -cd 'A-Za-z0-9')
  cp "$store" "$out/minus_$tag.sqlite"
  sqlite3 "$out/minus_$tag.sqlite" "delete from layers where device='$dev'; delete from devices where key='$dev';"
  "$bin" eval layers --db "$out/minus_$tag.sqlite" "${T[@]}" --predictions "$out/minus_$tag.csv" > "$out/minus_$tag.json"
  rm -f "$out/minus_$tag.sqlite"*
done
python3 "$(dirname "$0")/device_bagging.py" "$out"
