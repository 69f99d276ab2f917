#!/usr/bin/env bash
# Fuzzes every parser with libFuzzer (clang; ASan + UBSan; docs/hardening.md).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 30 s, all targets)
#
# Configures build-fuzz/ (CC=clang CXX=clang++ -DSCALEDL_FUZZ=ON, tests and bench
# off), builds only the fuzz targets, then runs each for SECONDS on a scratch copy
# of its seed corpus fuzz/corpus/<target>/ (the committed corpus is not grown),
# with its dictionary, -max_len for its format, -timeout=10, -rss_limit_mb=2048.
# Results and reproducers: build-fuzz/runs/<target>/ (log, crash-*/timeout-*/oom-*/leak-*).
# Exits 1 when any target found a crash, naming the target and the reproducer.
#
# Environment: FUZZ_DIR (default build-fuzz), JOBS (build, default nproc),
# FUZZ_FLAGS (extra libFuzzer flags), FUZZ_NO_BUILD=1 (use the existing binaries).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER=${1:-30}
shift || true
ALL=(fuzz_hf_config fuzz_space fuzz_plan fuzz_device_spec fuzz_store_rows fuzz_layer_model fuzz_safetensors
     fuzz_neusight_csv fuzz_bundle_manifest fuzz_comm fuzz_sweep)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (known: ${ALL[*]})" >&2; exit 2; }
done
[[ "$SECONDS_PER" =~ ^[0-9]+$ ]] && [ "$SECONDS_PER" -ge 1 ] ||
  { echo "fuzz.sh: SECONDS_PER_TARGET='$SECONDS_PER' must be a whole number >= 1" >&2; exit 2; }

max_len() {
  case "$1" in
    fuzz_layer_model) echo 32768 ;;   # manifest + XGBoost JSON of small models
    fuzz_safetensors) echo 16384 ;;   # header + tensors of a small graph model
    fuzz_space|fuzz_plan|fuzz_bundle_manifest) echo 8192 ;;   # bundle manifests: fields, intervals, ranges
    fuzz_comm) echo 4096 ;;           # --comm calibrations and nccl-tests files of a few rows
    fuzz_sweep) echo 4096 ;;          # --sweep lists and --csv / --anchor rows
    *) echo 4096 ;;                   # configs, device specs, store columns, CSV rows
  esac
}

FUZZ_DIR=${FUZZ_DIR:-build-fuzz}
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs clang)" >&2; exit 2; }
  mkdir -p "$FUZZ_DIR"
  CC=clang CXX=clang++ cmake -S . -B "$FUZZ_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCALEDL_FUZZ=ON \
        -DSCALEDL_CUDA=OFF -DSCALEDL_BUILD_TESTS=OFF -DSCALEDL_BUILD_BENCH=OFF \
        -DSCALEDL_PCH=OFF >"$FUZZ_DIR/configure.log" 2>&1 ||
    { cat "$FUZZ_DIR/configure.log" >&2; echo "fuzz.sh: configure failed" >&2; exit 2; }
  cmake --build "$FUZZ_DIR" -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}" >"$FUZZ_DIR/build.log" 2>&1 ||
    { tail -50 "$FUZZ_DIR/build.log" >&2; echo "fuzz.sh: build failed (log: $FUZZ_DIR/build.log)" >&2; exit 2; }
  echo "fuzz.sh: built ${TARGETS[*]} in $FUZZ_DIR"
fi

# LibTorch/XGBoost/OpenMP allocate at start-up and keep it: leak reports come
# only from there (fuzz/lsan.supp); ASan/UBSan findings abort the run.
export ASAN_OPTIONS=${ASAN_OPTIONS:-"halt_on_error=1:abort_on_error=1:print_stacktrace=1"}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-"halt_on_error=1:print_stacktrace=1"}
export LSAN_OPTIONS=${LSAN_OPTIONS:-"suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0"}
export OMP_NUM_THREADS=1

SCRATCH=$(mktemp -d "${TMPDIR:-/dev/shm}/scaledl-fuzz.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
failed=()
printf '%-18s %8s %11s %9s %7s %8s %7s %s\n' target seconds executions exec/s cov features corpus crashes
for t in "${TARGETS[@]}"; do
  runs="$FUZZ_DIR/runs/$t"
  rm -rf "$runs"
  mkdir -p "$runs/artifacts" "$SCRATCH/$t/corpus" "$SCRATCH/$t/tmp"
  cp -r "fuzz/corpus/$t/." "$SCRATCH/$t/corpus/"
  dict="$SCRATCH/$t/$t.dict"
  : >"$dict"
  [ "$t" = fuzz_neusight_csv ] || [ "$t" = fuzz_sweep ] || cat fuzz/dict/json.dict >>"$dict"
  [ -f "fuzz/dict/$t.dict" ] && cat "fuzz/dict/$t.dict" >>"$dict"
  start=$(date +%s)
  set +e
  SCALEDL_FUZZ_TMP="$SCRATCH/$t/tmp" "$FUZZ_DIR/fuzz/$t" "$SCRATCH/$t/corpus" \
    -max_total_time="$SECONDS_PER" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
    -dict="$dict" -artifact_prefix="$runs/artifacts/" -print_final_stats=1 ${FUZZ_FLAGS:-} >"$runs/log" 2>&1
  rc=$?
  set -e
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$runs/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$runs/log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$runs/log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  mapfile -t found < <(find "$runs/artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \
                         -o -name 'leak-*' \) | sort)
  printf '%-18s %8s %11s %9s %7s %8s %7s %s\n' "$t" "$took" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "${corp:-?}" "${#found[@]}"
  if [ "$rc" -ne 0 ] || [ ${#found[@]} -gt 0 ]; then
    failed+=("$t")
    echo "  $t: libFuzzer exit $rc; log $runs/log" >&2
    for f in "${found[@]}"; do echo "  reproducer: $FUZZ_DIR/fuzz/$t $f" >&2; done
    grep -m3 -E 'ERROR: |BUG: |runtime error|SUMMARY' "$runs/log" | sed 's/^/  /' >&2 || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in ${failed[*]} (reproducers above; logs in $FUZZ_DIR/runs/)" >&2
  exit 1
fi
echo "fuzz.sh: ${#TARGETS[@]} target(s) x ${SECONDS_PER} s, no crashes"
