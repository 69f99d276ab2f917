#!/usr/bin/env python3
"""Experiments of docs/unseen-gpu.md ("What limits the targets"): a copy of a store whose
GPU records are edited, so that `scaledl eval` / `eval layers` on the copy show what a
different spec sheet would give. Not a product path.

    python3 scripts/studies/device_patch.py SRC.sqlite DST.sqlite [--set "NAME:FIELD=VALUE" ...]
                                    [--clock-proxy W]

--set "Tesla P4:cores=20" sets a field of the record whose name is NAME (repeatable;
      FIELD may be extra.KEY; VALUE is parsed as JSON, else kept as a string)
--clock-proxy W  sets sustained_clock_mhz = clock_mhz x (b + W (1 - b)) on each GPU of
      BASE_CLOCKS, b = its published base clock / boost clock: a sustained clock between
      the base (W = 0) and the boost clock (W = 1). No such clock is published.
"""
import argparse
import json
import shutil
import sqlite3

# Published base and boost clocks, MHz (TechPowerUp GPU database pages of each part,
# www.techpowerup.com/gpu-specs/; the NVIDIA T4 and L4 product briefs agree for those two).
BASE_CLOCKS = {
    "Tesla P4": (886, 1114),
    "Tesla T4": (585, 1590),
    "Tesla P100-PCIE-16GB": (1190, 1329),
    "Tesla V100-PCIE-32GB": (1230, 1380),
    "NVIDIA A100-PCIE-40GB": (765, 1410),
    "NVIDIA H100 80GB HBM3": (1590, 1980),
}


def parse_value(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--set", action="append", default=[], metavar="NAME:FIELD=VALUE")
    ap.add_argument("--clock-proxy", type=float, metavar="W")
    a = ap.parse_args()
    if a.clock_proxy is not None and not 0 <= a.clock_proxy <= 1:
        ap.error(f"--clock-proxy={a.clock_proxy} must be in [0, 1]")
    edits = []
    for s in a.set:
        name, sep, rest = s.partition(":")
        field, eq, value = rest.partition("=")
        if not sep or not eq or not name or not field:
            ap.error(f"--set {s!r}: expected NAME:FIELD=VALUE")
        edits.append((name, field, parse_value(value)))
    shutil.copyfile(a.src, a.dst)
    db = sqlite3.connect(a.dst)
    records = {k: json.loads(r) for k, r in db.execute("SELECT key, record FROM devices")}
    names = {d["name"] for d in records.values()}
    for name, _, _ in edits:
        if name not in names:
            raise SystemExit(f"device_patch.py: error: no device named {name!r} in {a.src}")
    for key, d in records.items():
        for name, field, value in edits:
            if d["name"] != name:
                continue
            if field.startswith("extra."):
                d.setdefault("extra", {})[field[len("extra."):]] = value
            else:
                d[field] = value
        if a.clock_proxy is not None and d["name"] in BASE_CLOCKS and d.get("clock_mhz", 0) > 0:
            base, boost = BASE_CLOCKS[d["name"]]
            b = base / boost
            d["sustained_clock_mhz"] = round(d["clock_mhz"] * (b + a.clock_proxy * (1 - b)), 1)
            print(f"{d['name']}: base/boost {b:.3f}, sustained_clock_mhz {d['sustained_clock_mhz']}")
        db.execute("UPDATE devices SET record = ? WHERE key = ?", (json.dumps(d, sort_keys=True), key))
    db.commit()
    db.close()


if __name__ == "__main__":
    main()
