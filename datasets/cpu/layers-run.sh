#!/usr/bin/env bash
# Reproduces layers.sqlite (layers-README.md): the first CPU layer campaign.
# BUILD_DIR defaults to build/ (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")"
BIN=${BUILD_DIR:-../../build}/tools/scaledl
rm -f layers.sqlite layers.sqlite-wal layers.sqlite-shm
SCALEDL_GIT_COMMIT=${SCALEDL_GIT_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)} \
  "$BIN" bench layers --plan layers-plan.json --db layers.sqlite --device cpu --threads 1 \
  --campaign cpu-first --warmup 3 --repeats 10
"$BIN" db info --db layers.sqlite
# Fold the WAL into the file so the committed store is one file.
sqlite3 layers.sqlite "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE; VACUUM;" >/dev/null 2>&1 || true
