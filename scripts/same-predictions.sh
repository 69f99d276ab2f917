#!/usr/bin/env bash
# Writes the predictions of a fixed set of configurations (text, --json, sweeps,
# CSV, --gpus, scale) to $1, so two builds can be diffed byte for byte.
set -uo pipefail
B=${B:-build/tools/scaledl}
O=$1; mkdir -p "$O"
D=models/bundles/default
C=docs/results/comm/allreduce-a100.json
H=models/devices/h100-sxm.json
A=models/devices/a100-sxm4-80gb.json
i=0
run() { i=$((i+1)); "$B" "$@" >"$O/$i.out" 2>"$O/$i.err"; echo "rc=$?" >>"$O/$i.err"; echo "$*" >"$O/$i.cmd"; }
run predict models/gpt2.json --bundle $D --device-spec $H
run predict models/gpt2.json --bundle $D --device-spec $H --json
run predict models/bert-base.json --bundle $D --device-spec $A --batch 32 --seq 128 --dtype fp16 --json
run predict models/gpt2-large.json --bundle $D --device-spec $H --batch 4 --seq 1024 --mode fwd-bwd
run predict models/llama-style.json --bundle $D --device-spec $H --batch 2 --seq 2048 --dtype bf16 --json --samples 100000
run predict models/vit-base.json --bundle $D --device-spec $A --batch 64 --image 224 --json
run predict models/mixtral-8x7b.json --bundle $D --device-spec $H --gpus 64 --comm $C --pp 2 --ep 4 --batch 8 --seq 2048 --dtype bf16 --json
run predict models/gpt2-large.json --bundle $D --device-spec $H --gpus 8 --comm $C --tp 2 --batch 8 --seq 1024 --dtype bf16
run predict models/gpt2.json --bundle $D --device-spec $H --devices 8 --comm $C --json
run predict models/gpt2.json --bundle $D --device-spec $H --sweep batch=1,4,16 --sweep seq=128,512 --sweep dtype=fp32,bf16
run predict models/gpt2-large.json --bundle $D --batch 4 --seq 1024 --mode fwd-bwd --sweep device_spec=models/devices
run predict models/gpt2.json --bundle $D --device-spec $H --sweep batch=1..40 --sweep seq=64,256 --json
run predict models/t5-small.json --bundle $D --device-spec $H --raw --json
run predict models/qwen3-30b-a3b.json --bundle $D --device-spec $H --gpus 16 --comm $C --ep 8 --batch 4 --seq 4096 --dtype bf16 --zero 1 --recompute
run scale --comm $C models/gpt2-large.json --bundle $D --device-spec $H --batch 8 --seq 1024 --dtype bf16
run predict models/gpt2.json --bundle $D --device-spec $H --batch 0
run predict models/gpt2.json --bundle $D --device-spec models/nope.json
printf 'model,batch,seq\n'"$PWD"'/models/gpt2.json,8,128\n'"$PWD"'/models/bert-base.json,16,256\n' > "$O/in.csv"
run predict --bundle $D --device-spec $H --csv "$O/in.csv"
