#!/usr/bin/env bash
# The memory campaign (issue #15): allocator-exact peak memory of whole
# iterations on this machine's CPU, one thread, into memory.sqlite. Resumable:
# a rerun skips what the store has. Usage (repository root, after
# scripts/setup.sh):   BUILD_DIR=build datasets/memory/campaign.sh
# Timing is kept short (the peak does not depend on it): the rows' times are
# not meant as time labels.
set -euo pipefail
cd "$(dirname "$0")"
BIN=$(realpath "${BUILD_DIR:-../../build}")/tools/scaledl
DB=memory.sqlite
T0=$(date +%s)
TIMING="--warmup 1 --warmup-extra 0 --repeats 1 --probe-repeats 0 --max-seconds 30 --quiet"
[ -s plans/id.json ] && [ -s plans/ood.json ] || python3 make-plans.py
[ -s probe.json ] || "$BIN" probe --device cpu --threads 1 --db "$DB" --json > probe.json
"$BIN" bench models --plan plans/id.json --db "$DB" --device cpu --threads 1 --campaign memory-id $TIMING
"$BIN" bench models --plan plans/ood.json --db "$DB" --device cpu --threads 1 --campaign memory-ood $TIMING
echo "campaign.sh: $(( $(date +%s) - T0 )) s wall"
"$BIN" db info --db "$DB"
python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()" "$DB"
