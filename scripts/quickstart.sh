#!/usr/bin/env bash
# The main job on a fresh machine: install + build the `scaledl` tool only
# (scripts/setup.sh; the tests are built by scripts/test.sh), then
# pretrain the predictor (one bundle) on the committed H100 campaign and predict
# the epoch time of BERT-base on that GPU, plan what to benchmark next, predict GPUs from
# their spec sheets with the shipped bundle, and (step 6) train the CPU bundle and predict on
# this machine's CPU from its probe record. Outputs go to out/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
B=build/tools/scaledl
mkdir -p out
echo "== 1. pretrain: layer models + graph refinement on the H100 campaign -> one bundle"
$B train --db datasets/h100/h100.sqlite --out out/h100-bundle --encoder transformerconv
echo "== 2. predict: BERT-base, batch 32 x seq 128, fp32, AdamW, 100,000 samples per epoch, on the H100"
$B predict models/bert-base.json --batch 32 --seq 128 --bundle out/h100-bundle \
    --device-spec datasets/h100/probe.json --samples 100000
echo "== 3. what to benchmark next: 32 more model configs, D-optimal given what is measured"
$B plan --space datasets/h100/models-space.json --budget 32 --existing datasets/h100/h100.sqlite \
    --seed 2 --out out/next-models-plan.json
echo "== 4. a GPU you do not have: GPT-2 large on an H100 SXM from its spec sheet, with the shipped default bundle"
$B predict --bundle models/bundles/default models/gpt2-large.json --batch 4 --seq 1024 \
    --device-spec models/devices/h100-sxm.json --mode fwd-bwd
echo "== 5. which GPU to rent: the same job on every spec sheet shipped (models/devices), with the memory verdict"
$B predict --bundle models/bundles/default models/gpt2-large.json --batch 4 --seq 1024 --mode fwd-bwd \
    --sweep device_spec=models/devices | cut -d, -f1-3,12-14,24-
echo "== 6. this machine's CPU: the CPU bundle from every committed CPU campaign (about 2 min), this CPU's"
echo "   probe record, and a prediction that takes models/bundles/cpu by default (no --bundle)"
[ -d models/bundles/cpu ] || scripts/build_cpu_bundle.sh
$B probe --device cpu --json > out/this-cpu.json
$B predict models/gpt2.json --batch 8 --seq 128 --device-spec out/this-cpu.json
