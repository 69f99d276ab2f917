#!/usr/bin/env bash
# The cross-device protocol on the second machine, datasets/cpu-intel (Intel host):
# scripts/reproduce/eval_cpu_cross_device.sh with TEST=cpu-intel (docs/results/cpu-intel/README.md).
#   scripts/reproduce/eval_cpu_intel.sh [without|test-layers ...]   (default: both)
exec env TEST=cpu-intel "$(dirname "$0")/eval_cpu_cross_device.sh" "$@"
