#!/usr/bin/env bash
# One call on the lent GPU machine (device tool; docs/unseen-gpu.md, "H200 operators"):
# NeuSight's operator microbenchmarks on this GPU (scripts/gpu/neusight_ops_bench.py), needing
# only the machine's PyTorch. Results: $OUT/ops.tar.gz (ops/<op>/<Device>.csv, env.json,
# skipped.csv), $OUT/env.txt, $OUT/ops.log.
#   OUT=/tmp/out OPS_S=400 scripts/gpu/gpu_ops_check.sh
#   OUT=/tmp/out OPS_S=400 OPS_ARGS="--dtype bf16 --backward" scripts/gpu/gpu_ops_check.sh   (BF16, with backward)
# PROFILE_S>0 first profiles Hugging Face runs kernel by kernel (scripts/gpu/hf_profile.py, needs
# transformers; $OUT/profile/): Switch-XL at 512 and 2,048 tokens and GPT-3 XL as a control
# (docs/unseen-gpu.md, "How much of that error is transfer"); PROFILE_RUNS overrides the runs.
#   OUT=/tmp/out PROFILE_S=120 OPS_S=300 OPS_ARGS="--dtype bf16 --backward" scripts/gpu/gpu_ops_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to the result folder}
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda)'
  lscpu | grep -E "Model name|^CPU\(s\)"; } 2>&1 | tee "$OUT/env.txt"
if [ "${PROFILE_S:-0}" -gt 0 ]; then
  PYTHONUNBUFFERED=1 timeout "$PROFILE_S" python3 scripts/gpu/hf_profile.py --out "$OUT/profile" \
      --runs "${PROFILE_RUNS:-inference:switchxl4:512:1,inference:switchxl4:2048:1,inference:gpt3_xl:2048:2}" \
      > "$OUT/profile.log" 2>&1
  echo "profile rc=$? at $(( $(date +%s) - T0 )) s"; tail -4 "$OUT/profile.log"
fi
mkdir -p /tmp/ops
PYTHONUNBUFFERED=1 timeout $(( ${OPS_S:-400} + 40 )) python3 scripts/gpu/neusight_ops_bench.py \
    --root datasets/neusight --out /tmp/ops --budget-s ${OPS_S:-400} ${OPS_ARGS:-} > "$OUT/ops.log" 2>&1
echo "ops rc=$? at $(( $(date +%s) - T0 )) s"; tail -4 "$OUT/ops.log"
tar -C /tmp -czf "$OUT/ops.tar.gz" ops; ls -la "$OUT/ops.tar.gz"
