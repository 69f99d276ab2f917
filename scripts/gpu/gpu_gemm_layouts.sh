#!/usr/bin/env bash
# One call on a lent GPU machine (device tool), under 10 minutes: how far AIConfigurator's
# forward-only GEMM tables carry to our forward and to the backward GEMMs (dgrad, wgrad: other
# shapes and layouts), which no public table times (docs/gpu-data.md, "Backward GEMMs").
# Builds ScaleDL against the machine's PyTorch (scripts/gpu/gpu_build.sh), probes the GPU, and
# times the BF16 linear layers of datasets/h200/gemm-layouts-plan.json (27 layers whose forward,
# dgrad and wgrad GEMMs are all on the compact AIConfigurator grid) and 16 causal flash_attention
# layers (SDPA on the context-attention grid), forward and backward; then
# scripts/gpu/gemm_layouts_report.py sets them against the tables of the same GPU (and gives the
# flash backward / forward ratio that no public table has).
#   OUT=/tmp/out GPU_FOLDER=h200_sxm scripts/gpu/gpu_gemm_layouts.sh
# A CPU dry run of everything but the build (small shapes, FP32; 23 s on a 2-vCPU Intel Xeon VM,
# most of it the probe):
#   OUT=/tmp/out DRY_RUN=1 scripts/gpu/gpu_gemm_layouts.sh
# Results: $OUT/gemm-layouts.sqlite, $OUT/probe.json, $OUT/report.md, $OUT/env.txt. Commit them
# under datasets/h200/ with this command.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to the result folder}
GPU_FOLDER=${GPU_FOLDER:-h200_sxm}
t0=$(date +%s)
if [ "${DRY_RUN:-0}" = 1 ]; then
  B=${SCALEDL_BIN:-build/tools/scaledl}
  DEV=cpu
  PLAN=$OUT/plan.json
  python3 scripts/gpu/make_gemm_layout_plan.py --small --dtype fp32 > "$PLAN"
  DT=fp32
else
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv | tee "$OUT/env.txt"
  scripts/gpu/gpu_build.sh "$OUT" 16 || exit 1
  source .deps/gpu_env.sh
  B=build-gpu/tools/scaledl
  DEV=cuda
  PLAN=datasets/h200/gemm-layouts-plan.json
  DT=bf16
fi
DB=$OUT/gemm-layouts.sqlite
$B probe --device "$DEV" --json --db "$DB" > "$OUT/probe.json" || exit 1
timeout "${LAYERS_S:-240}" $B bench layers --plan "$PLAN" --db "$DB" --device "$DEV" --campaign gemm-layouts \
    --repeats 20 --min-sample-ms 2 --quiet 2>&1 | tail -2
python3 scripts/gpu/gemm_layouts_report.py --db "$DB" --gpu "$GPU_FOLDER" --dtype "$DT" > "$OUT/report.md"
tail -1 "$OUT/report.md"
echo "total: $(( $(date +%s) - t0 )) s"
