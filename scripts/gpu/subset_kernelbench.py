#!/usr/bin/env python3
"""Compact, deterministic subset of the KernelBench level-1 timings for the repository.

Reads the CSV copy of ScalingIntelligence/KernelBench (../shared/data/kernelbench, README.md
there) and writes the same file names with only the columns that `scaledl import kernelbench`
(libscaledl/src/gpudata/kernelbench.cpp) reads and only the problems it maps to a layer type
(the names of its table kProblems, read from that file so the two cannot disagree):

  level1_eager_compile.csv   every eager row of a mapped problem (all GPUs, runs and problem
                             sets): gpu_hardware, timing_dir, eager_timing_commit,
                             problem_set_id, problem_id, problem_name, eager_ms, eager_std_ms
  level1_problem_shapes.csv  the mapped problems of every problem set: problem_set_id,
                             problem_id, problem_name, constants_json
  runs_index.csv             the eager runs those rows come from: timing_dir, config,
                             timing_commit, torch_pin_in_requirements_at_commit,
                             timing_code_flushes_l2_at_commit
  LICENSE                    copied verbatim

Values are copied verbatim, rows in the source's order. Python 3 standard library only.
Usage (from the repository root):
  python3 scripts/gpu/subset_kernelbench.py --src /work/shared/data/kernelbench \
      --out datasets/gpus/kernelbench
"""
import argparse
import csv
import os
import re
import shutil
import sys

IMPORTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "libscaledl", "src",
                        "gpudata", "kernelbench.cpp")

EAGER_COLS = ["gpu_hardware", "timing_dir", "eager_timing_commit", "problem_set_id", "problem_id",
              "problem_name", "eager_ms", "eager_std_ms"]
SHAPE_COLS = ["problem_set_id", "problem_id", "problem_name", "constants_json"]
RUN_COLS = ["timing_dir", "config", "timing_commit", "torch_pin_in_requirements_at_commit",
            "timing_code_flushes_l2_at_commit"]


def mapped_problems(path):
    """The problem names of the importer's table kProblems."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("kProblems = {"):]
    table = table[:table.index("};")]
    names = re.findall(r'\{"(\d+_[^"]*)",\s*LayerType::', table)
    if not names:
        sys.exit(f"{path}: no problem names found in kProblems")
    return set(names)


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return rows


def write(path, cols, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow([r[c] for c in cols])
    return len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="the shared KernelBench folder")
    ap.add_argument("--out", required=True, help="output folder (datasets/gpus/kernelbench)")
    ap.add_argument("--importer", default=IMPORTER, help="kernelbench.cpp, whose kProblems is the selection")
    a = ap.parse_args()
    names = mapped_problems(a.importer)
    os.makedirs(a.out, exist_ok=True)

    eager = [r for r in read(os.path.join(a.src, "level1_eager_compile.csv")) if r["problem_name"] in names]
    shapes = [r for r in read(os.path.join(a.src, "level1_problem_shapes.csv")) if r["problem_name"] in names]
    used = {(r["timing_dir"], r["eager_timing_commit"]) for r in eager}
    runs = [r for r in read(os.path.join(a.src, "runs_index.csv"))
            if r["config"] == "eager" and (r["timing_dir"], r["timing_commit"][:12]) in used]
    missing = used - {(r["timing_dir"], r["timing_commit"][:12]) for r in runs}
    if missing:
        sys.exit(f"runs without an eager row in runs_index.csv: {sorted(missing)}")
    found = {r["problem_name"] for r in shapes}
    if found != names:
        sys.exit(f"problems of kProblems not in the shapes: {sorted(names - found)}")

    n_e = write(os.path.join(a.out, "level1_eager_compile.csv"), EAGER_COLS, eager)
    n_s = write(os.path.join(a.out, "level1_problem_shapes.csv"), SHAPE_COLS, shapes)
    n_r = write(os.path.join(a.out, "runs_index.csv"), RUN_COLS, runs)
    shutil.copyfile(os.path.join(a.src, "LICENSE"), os.path.join(a.out, "LICENSE"))
    print(f"{len(names)} problems: {n_e} eager rows, {n_s} shape rows, {n_r} runs -> {a.out}")


if __name__ == "__main__":
    main()
