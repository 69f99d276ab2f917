#!/usr/bin/env bash
# One-command setup: install every dependency from Debian packages (idempotent),
# then configure ScaleDL in Release into build/ and build what the main job needs:
# the `scaledl` command-line tool (tests and benchmarks are built by scripts/test.sh).
#
#   scripts/setup.sh [--no-build] [--all] [--jobs N]
#     --no-build  install and stop
#     --all       build every target (tools, tests, benchmarks)
#
# Environment: BUILD_DIR (default build), SCALEDL_CUDA (AUTO|ON|OFF, default AUTO),
# Torch_DIR (use another LibTorch, e.g. one from a PyTorch install).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=1
TARGETS=(--target scaledl)
JOBS=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --all) TARGETS=() ;;
    --jobs) JOBS="$2"; shift ;;
    *) echo "setup.sh: unknown option '$1' (known: --no-build, --all, --jobs N)" >&2; exit 2 ;;
  esac
  shift
done

PKGS=(build-essential cmake pkg-config
      libtorch-dev libopenblas0-pthread libgloo-dev
      libxgboost-dev xgboost
      nlohmann-json3-dev libeigen3-dev libfmt-dev libcli11-dev libsqlite3-dev libssl-dev gnuplot-nox
      libsentencepiece-dev libturbojpeg0-dev   # bench pipeline (tokenizer, JPEG decode)
      libgtest-dev libgmock-dev libbenchmark-dev
      pybind11-dev python3-dev python3-pybind11 python3-pytest   # the Python module and its tests (docs/python.md)
      clang-14 clang libclang-rt-14-dev   # scripts/fuzz.sh: libFuzzer + ASan/UBSan runtimes (a Recommends only)
      clang-format-14)                    # scripts/format.sh --check (CI)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

[ "$BUILD" -eq 1 ] || exit 0

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
      -DSCALEDL_CUDA="${SCALEDL_CUDA:-AUTO}" \
      -DSCALEDL_BUILD_TESTS=ON -DSCALEDL_BUILD_BENCH=ON \
      ${Torch_DIR:+-DTorch_DIR="$Torch_DIR"}
cmake --build "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}"
echo "setup: built $BUILD_DIR/tools/scaledl"
# The Python module (when pybind11 was found): PYTHONPATH=build/python python3 -c "import scaledl"
if cmake --build "$BUILD_DIR" --target help 2>/dev/null | grep -q scaledl_python; then
  cmake --build "$BUILD_DIR" -j "$JOBS" --target scaledl_python
  echo "setup: built the Python module in $BUILD_DIR/python (docs/python.md)"
  # `python3 -c "import scaledl"` without PYTHONPATH: a .pth file in the user site-packages of each
  # python3 here that can load the module (as `pip install -e` would; remove the file to undo).
  mod_dir=$(cd "$BUILD_DIR/python" && pwd)
  for py in python3 /usr/bin/python3; do
    command -v "$py" > /dev/null || continue
    site=$("$py" -c 'import site; print(site.getusersitepackages() if site.ENABLE_USER_SITE else "")' 2>/dev/null) || continue
    [ -n "$site" ] || continue
    if PYTHONPATH="$mod_dir" "$py" -c "import scaledl" 2> /dev/null && mkdir -p "$site" 2> /dev/null &&
        echo "$mod_dir" > "$site/scaledl-build.pth" 2> /dev/null; then
      echo "setup: $py imports scaledl from $mod_dir ($site/scaledl-build.pth)"
    fi
  done
fi
