#!/usr/bin/env bash
# DeepSeek-V2-Lite, DeepSeek-V3 and Qwen1.5-MoE shapes and llama-style at nine sizes
# (make_plan.py), timed on this CPU machine with cpu-llamas' layer plan for calibration, by
# cpu-llamas' campaign script (one store, one thread, the same timing options). Resumable.
#
#   BUILD_DIR=build CPU=1 datasets/cpu-deepseek/campaign.sh [layers|models|all]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DATASET=$here exec "$here/../cpu-llamas/campaign.sh" "$@"
