#!/usr/bin/env bash
# clang-format (Debian's clang-format 14, .clang-format) over every tracked C++/CUDA
# source: `scripts/format.sh` rewrites them, `scripts/format.sh --check` only
# lists the files that differ and exits 1 if any does (CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$CF" ]; then
  echo "scaledl: error: clang-format not found (Debian: apt install clang-format-14; scripts/setup.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h' '*.cuh' '*.cpp.in')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    "$CF" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'format: not clang-formatted: %s\n' "${bad[@]}" >&2
    echo "scaledl: error: ${#bad[@]} file(s) differ from .clang-format (run scripts/format.sh)" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files clang-formatted"
  # std::filesystem::remove_all resolves into PyTorch 2.11's libtorch.so, whose copy crashed on a
  # non-empty directory (scaledl/core/fs_util.hpp, remove_tree): no source may call it.
  if git grep -n -E '(filesystem|fs)::remove_all *\(' -- "${files[@]}"; then
    echo "scaledl: error: the lines above call std::filesystem::remove_all: use scaledl::remove_tree (scaledl/core/fs_util.hpp)" >&2
    exit 1
  fi
else
  "$CF" -i "${files[@]}"
fi
