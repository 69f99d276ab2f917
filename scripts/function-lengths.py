#!/usr/bin/env python3
"""Lists the functions of clang-formatted C++ sources longer than a limit.

    scripts/function-lengths.py [--max N] [PATH ...]   (default: --max 150 libscaledl)

A function is a definition whose body opens at the end of a line and closes with
a `}` at the same indentation (what clang-format writes); lambdas and local
classes count in the function around them. Exits 1 when one is longer than N.
"""
import argparse, pathlib, re, sys

HEAD = re.compile(r"^(\s*)(?!(?:if|for|while|switch|catch|do|else|namespace|struct|class|enum|union)\b)"
                  r"[^#/ ][^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->\s*[^{;]+)?\{\s*$")

def functions(path):
    lines = path.read_text(errors="replace").splitlines()
    i = 0
    while i < len(lines):
        m = HEAD.match(lines[i])
        # a signature can span lines: find where it starts (first line after a ';', '}' or blank)
        if m and "=" not in lines[i].split("(")[0]:
            start = i
            while start > 0 and lines[start - 1].strip() and not re.search(r"[;{}:]\s*$|^\s*//|^\s*#", lines[start - 1]):
                start -= 1
            indent = re.match(r"\s*", lines[start]).group(0)
            j = i + 1
            while j < len(lines) and not re.match(re.escape(indent) + r"\}", lines[j]):
                j += 1
            name = re.search(r"([\w:~<>]+)\s*\(", " ".join(l.strip() for l in lines[start:i + 1]))
            yield (name.group(1) if name else "?"), start + 1, j - start + 1
            i = j + 1
        else:
            i += 1

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=150)
    ap.add_argument("paths", nargs="*", default=["libscaledl"])
    a = ap.parse_args()
    long = []
    for p in a.paths:
        root = pathlib.Path(p)
        files = [root] if root.is_file() else sorted(list(root.rglob("*.cpp")) + list(root.rglob("*.hpp")))
        for f in files:
            for name, line, n in functions(f):
                if n > a.max:
                    long.append((n, f"{f}:{line}", name))
    for n, where, name in sorted(long, reverse=True):
        print(f"{n:5d}  {where}  {name}")
    print(f"{len(long)} function(s) over {a.max} lines", file=sys.stderr)
    return 1 if long else 0

sys.exit(main())
