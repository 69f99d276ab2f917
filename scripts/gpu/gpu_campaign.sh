#!/usr/bin/env bash
# The H100 campaign, as run on the lent GPU machine (device tool, see docs/bench.md):
# builds ScaleDL against PyTorch's LibTorch 2.x + CUDA with the Debian packages
# carried in .deps/ (scripts/gpu/fetch_gpu_deps.sh), runs the GPU tests, probes the GPU
# and runs the layer and model plans of datasets/h100/ (with the new model_types' plan,
# new-types-plan.json, and the BF16 training kinds, training-kinds-plan.json, since
# 2026-11-28). Results go to $OUT.
#   OUT=/tmp/out scripts/gpu/gpu_campaign.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to the result folder}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.txt"
t0=$(date +%s)
scripts/gpu/gpu_build.sh "$OUT" 16 || exit 1
source .deps/gpu_env.sh
B=build-gpu/tools/scaledl
timeout 120 build-gpu/test/test_bench > "$OUT/test_bench.log" 2>&1; echo "test_bench rc=$? $(tail -1 "$OUT/test_bench.log")"
$B probe --device cuda --json --db "$OUT/h100.sqlite" > "$OUT/probe.json" && cat "$OUT/probe.json" | head -30
timeout ${LAYERS_S:-130} $B bench layers --plan datasets/h100/layers-plan.json --db "$OUT/h100.sqlite" \
    --device cuda --campaign h100-dopt --repeats 20 --min-sample-ms 2 --quick-probe 2>&1 | tail -3
timeout 45 $B bench layers --plan datasets/cpu/layers-plan.json --db "$OUT/h100.sqlite" \
    --device cuda --campaign h100-tiny --repeats 20 --min-sample-ms 2 --quick-probe 2>&1 | tail -3
# The training kinds that no GPU row covers in BF16 (embedding, cross entropy, mul, pointwise, the
# optimizer step; models/spaces/training-kinds.json, 64 configs, FP32 beside them; since 2026-11-28,
# not yet run on a GPU; a CPU dry run of one config per kind and dtype took 19 s): KINDS_S=0 skips them.
[ "${KINDS_S:-60}" -gt 0 ] && timeout ${KINDS_S:-60} $B bench layers --plan datasets/h100/training-kinds-plan.json \
    --db "$OUT/h100.sqlite" --device cuda --campaign h100-training-kinds --repeats 20 --min-sample-ms 2 \
    --quick-probe 2>&1 | tail -3
timeout ${MODELS_S:-210} $B bench models --plan datasets/h100/models-plan.json --db "$OUT/h100.sqlite" \
    --device cuda --campaign h100-models --repeats 10 2>&1 | tail -3
# The model_types no GPU has run (DeepSeek, gpt-oss, Mixtral, Qwen3(-MoE), Gemma 2; datasets/h100/
# make_new_types_plan.py), BF16: NEW_TYPES_S=0 skips them. Not yet run on a GPU.
[ "${NEW_TYPES_S:-150}" -gt 0 ] && timeout ${NEW_TYPES_S:-150} $B bench models --plan datasets/h100/new-types-plan.json \
    --db "$OUT/h100.sqlite" --device cuda --campaign h100-new-types --repeats 10 2>&1 | tail -3
$B db info --db "$OUT/h100.sqlite"
echo "total: $(( $(date +%s) - t0 )) s"
