#!/usr/bin/env bash
# One call on a lent GPU machine (device tool), under 10 minutes: scripts/gpu/gpu_training_kinds.py
# (BF16 and FP8 GEMMs in the three layouts of training, SDPA forward and backward, the kernels
# around the GEMMs, AdamW, and whole Hugging Face training iterations with SDPA and LoRA), with the
# machine's facts in env.txt. Needs only the machine's PyTorch, transformers and peft: no build.
#   OUT=/tmp/out DEADLINE_S=500 scripts/gpu/gpu_training_kinds.sh
# A CPU dry run (small shapes, FP32; ~3 s; the Hugging Face part needs transformers):
#   OUT=/tmp/dry DRY_RUN=1 scripts/gpu/gpu_training_kinds.sh
# Results in $OUT (7 CSVs + env.txt); commit them under datasets/h200/training-kinds/ with this command.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to the result folder}
t0=$(date +%s)
if [ "${DRY_RUN:-0}" = 1 ]; then
  PY=${PYTHON:-/usr/bin/python3}
  ARGS=(--device cpu --small)
  echo "dry run on $(uname -n)" > "$OUT/env.txt"
else
  PY=python3
  ARGS=(--device cuda --deadline-s "${DEADLINE_S:-500}")
  { nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
    lscpu | grep -E "Model name|^CPU\(s\)"; } > "$OUT/env.txt" 2>&1
fi
PYTHONUNBUFFERED=1 timeout "${PY_TIMEOUT_S:-545}" "$PY" scripts/gpu/gpu_training_kinds.py --out "$OUT" "${ARGS[@]}"
echo "gpu_training_kinds.py rc=$?"
[ -f "$OUT/env-py.txt" ] && { cat "$OUT/env-py.txt" >> "$OUT/env.txt"; rm "$OUT/env-py.txt"; }
for f in "$OUT"/*.csv; do echo "$(basename "$f"): $(grep -c ',ok,' "$f") ok, $(grep -c -E ',(error|oom),' "$f") failed, $(grep -c ',skipped,' "$f") skipped"; done
grep -h -E ',(error|oom),' "$OUT"/*.csv | cut -c1-220 | sort | uniq | head -12
echo "total: $(( $(date +%s) - t0 )) s"
