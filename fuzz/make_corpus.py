#!/usr/bin/env python3
"""Regenerates the committed seed corpora fuzz/corpus/<target>/ from files of the
repository (models/, models/spaces/, datasets/) and, for the model-file targets,
from a small layer-model directory and graph model trained by a `scaledl` binary:

    fuzz/make_corpus.py [--scaledl build/tools/scaledl]

Seeds are kept small (a few KB each; the whole corpus well under 1 MB): plans
are cut to a few configs, model files come from 3-round / depth-3 XGBoost
models and a 2-wide graph model. Run it again when a file format changes (e.g.
the checksums of the model manifests), then commit fuzz/corpus/.
"""
import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def src(*p):
    return os.path.join(ROOT, *p)


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(*p):
    with open(src(*p), "rb") as f:
        return f.read()


def rewrite_model_paths(obj):
    """'../../models/bert-base.json' -> 'models/bert-base.json' (the harness's layout)."""
    if isinstance(obj, dict):
        return {k: rewrite_model_paths(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rewrite_model_paths(v) for v in obj]
    if isinstance(obj, str) and obj.endswith(".json") and "/" in obj:
        return "models/" + os.path.basename(obj)
    return obj


def hf_config():
    for f in sorted(os.listdir(src("models"))):
        if f.endswith(".json"):
            put("fuzz_hf_config", f, read("models", f))
    cfg = json.loads(read("models", "gpt2.json"))
    cfg["scaledl"] = {"batch": 4, "seq_len": 64, "dtype": "bf16", "optimizer": "sgd", "optimizer_step": False}
    put("fuzz_hf_config", "gpt2-settings.json", json.dumps(cfg))
    t5 = json.loads(read("models", "t5-small.json"))
    t5["feed_forward_proj"] = "gated-gelu"
    t5["scaledl"] = {"seq_len": 32, "tgt_len": 16, "num_devices": 4}
    put("fuzz_hf_config", "t5-gated.json", json.dumps(t5))


def space():
    for d, prefix in (("models/spaces", "m-"), ("datasets/cpu-v2/spaces", "cpu-v2-")):
        for f in sorted(os.listdir(src(d))):
            if f.endswith(".json"):
                j = rewrite_model_paths(json.loads(read(d, f)))
                j.pop("_comment", None)
                put("fuzz_space", prefix + f, json.dumps(j, indent=1))
    exprs = [
        "d_in % s == 0 && type == 'linear'",
        "tokens * d_in <= 65536 && dtype == 'fp32'",
        "min(tokens, d_in) * 2 >= max(s, bias) || !(log2(d_in) < sqrt(tokens))",
        "floor(tokens / 3) + ceil(-d_in % 7) != 0",
        "4 * d_in",
        "(((tokens + 1) * (d_in - 2)) / (s + bias)) > 0.5e1",
    ]
    for i, e in enumerate(exprs):
        put("fuzz_space", f"expr-{i}.txt", e)


def plan():
    for path, n in (("datasets/cpu/layers-plan.json", 4), ("datasets/h100/layers-plan.json", 3),
                    ("datasets/h100/models-plan.json", 2), ("datasets/cpu-v2/plans/t5.json", 2),
                    ("datasets/cpu-v2/plans/vit.json", 2), ("datasets/cpu-v2/plans/llama.json", 2)):
        j = json.loads(read(path))
        j["configs"] = j["configs"][:n]
        j.pop("design", None)
        put("fuzz_plan", path.replace("/", "-"), json.dumps(rewrite_model_paths(j), indent=1))
    inline = {"kind": "models", "configs": [{"model": json.loads(read("models", "opt-125m.json")),
                                             "overrides": {"num_hidden_layers": 1},
                                             "settings": {"batch": 2, "seq_len": 16}}]}
    put("fuzz_plan", "inline-model.json", json.dumps(inline))
    arr = {"kind": "layers", "configs": [{"type": "attention", "dims": [2, 4, 128, 128, 64], "dtype": "bf16"},
                                         {"type": "optimizer", "dims": {"params": 1000, "kind": 2}}]}
    put("fuzz_plan", "dims-array.json", json.dumps(arr))


def device_spec():
    put("fuzz_device_spec", "h100-probe.json", read("datasets/h100/probe.json"))
    put("fuzz_device_spec", "cpu-v2-probe.json", read("datasets/cpu-v2/probe.json"))
    d = "datasets/neusight/device_configs"
    for f in sorted(os.listdir(src(d))):
        put("fuzz_device_spec", "neusight-" + f, read(d, f))


def store_rows():
    c = sqlite3.connect("file:" + src("datasets/cpu/models.sqlite") + "?mode=ro", uri=True)
    model, settings, node_times = c.execute("SELECT model, settings, node_times FROM models LIMIT 1").fetchone()
    record = c.execute("SELECT record FROM devices LIMIT 1").fetchone()[0]
    c.close()
    nt = json.loads(node_times)[:6]
    for col, name, text in ((0, "dims", "[64,256,1024,1]"), (0, "dims5", "[2,4,128,128,64]"), (1, "record", record),
                            (1, "record-neusight", read("datasets/neusight/device_configs/Tesla_T4.json").decode()),
                            (2, "model", model), (3, "settings", settings), (4, "node_times", json.dumps(nt)),
                            (5, "fwd_median_ms", "0.25"), (5, "fwd_median_text", "abc")):
        put("fuzz_store_rows", f"{col}-{name}", bytes([col]) + text.encode())


def layer_model_and_graph(scaledl):
    tmp = tempfile.mkdtemp(prefix="scaledl-corpus-")
    try:
        lm, gm = os.path.join(tmp, "layers"), os.path.join(tmp, "graph")
        subprocess.run([scaledl, "train", "layers", "--db", src("datasets/cpu/layers.sqlite"), "--out", lm,
                        "--folds", "0", "--rounds", "3", "--max-depth", "3"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([scaledl, "train", "graph", "--db", src("datasets/cpu/models.sqlite"), "--layers", lm,
                        "--out", gm, "--hidden", "2", "--gnn-layers", "1", "--heads", "1", "--epochs", "2"],
                       check=True, stdout=subprocess.DEVNULL)
        for f in ("linear.json", "attention.json", "optimizer.json"):
            with open(os.path.join(lm, f), "rb") as fh:
                put("fuzz_layer_model", "xgb-" + f, fh.read())
        with open(os.path.join(lm, "manifest.json")) as fh:
            man = json.load(fh)
        for keep in (["linear"], ["add", "softmax"]):
            m = dict(man)
            m["models"] = {k: v for k, v in man["models"].items() if k in keep}
            if "manifest_sha256" in m:  # the checksum over the rest, as nlohmann's dump() writes it
                m.pop("manifest_sha256")
                text = json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                m["manifest_sha256"] = hashlib.sha256(text.encode()).hexdigest()
            parts = ["#@file manifest.json\n" + json.dumps(m, indent=1)]
            for k in keep:
                with open(os.path.join(lm, man["models"][k]["file"])) as fh:
                    parts.append("#@file " + man["models"][k]["file"] + "\n" + fh.read())
            put("fuzz_layer_model", "dir-" + "-".join(keep), "\n".join(parts))
        for f in os.listdir(gm):
            if f.endswith(".safetensors"):
                with open(os.path.join(gm, f), "rb") as fh:
                    put("fuzz_safetensors", "graph-model.safetensors", fh.read())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def safetensors_small():
    def st(tensors, meta):
        header, blob = {}, b""
        for name, (dt, shape, data) in tensors.items():
            header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
            blob += data
        header["__metadata__"] = meta
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        return struct.pack("<Q", len(h)) + h + blob
    put("fuzz_safetensors", "small.safetensors",
        st({"w": ("F32", [2, 3], struct.pack("<6f", *range(6))), "n": ("I64", [2], struct.pack("<2q", 7, -1)),
            "d": ("F64", [], struct.pack("<d", 0.5))}, {"format": "other", "config": "{\"a\": 1}"}))
    put("fuzz_safetensors", "empty.safetensors", st({}, {}))


def neusight_csv():
    for rel in ("ops/linear/Tesla_T4.csv", "ops/ln/Tesla_T4.csv", "ops/softmax/Tesla_T4.csv", "ops/add/Tesla_T4.csv",
                "ops/div/Tesla_T4.csv", "ops-transformer-shapes/bmm.csv", "ops-transformer-shapes/vec.csv"):
        lines = read("datasets/neusight", rel).decode().splitlines()
        put("fuzz_neusight_csv", rel.replace("/", "-"), "\n".join(lines[:6]) + "\n")
    put("fuzz_neusight_csv", "quoted.csv",
        'OPName,Latency,Device,B,H\r\n"gelu","0.5","Tesla T4",4,"1""0"\r\n"relu",1.0e-1,"NVIDIA A100-PCIE-40GB",2,8\r\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scaledl", default=src("build", "tools", "scaledl"))
    a = ap.parse_args()
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    hf_config()
    space()
    plan()
    device_spec()
    store_rows()
    safetensors_small()
    neusight_csv()
    if os.access(a.scaledl, os.X_OK):
        layer_model_and_graph(a.scaledl)
    else:
        print(f"make_corpus: no {a.scaledl}: layer-model and graph seeds skipped", file=sys.stderr)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(OUT) for f in fs)
    print(f"make_corpus: {sum(len(fs) for _, _, fs in os.walk(OUT))} seeds, {total} bytes in {OUT}")


if __name__ == "__main__":
    main()
