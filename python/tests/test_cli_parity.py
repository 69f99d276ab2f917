"""The module predicts what `scaledl predict ... --json` prints: the same dict (json.loads of the
CLI's output against Prediction.json / Row.json), every number equal with Bundle(memo=False), and
equal up to the refinement's float32 rounding (relative 1e-6) on a warm bundle (memo=True)."""

import re

import pytest
from conftest import BUNDLE, cli_args, cli_json, cli_many, run_cli

H100 = "models/devices/h100-sxm.json"
A100 = "models/devices/a100-sxm4-80gb.json"

# (id, model, options): one configuration each, across model families, dtypes, modes and options.
SINGLE = [
    ("gpt2-train", "models/gpt2.json", dict(batch=8, seq=512, device=H100)),
    ("bert-bf16-epoch", "models/bert-base.json", dict(batch=32, seq=128, dtype="bf16", samples=100000, device=A100)),
    ("vit-inference-fp16", "models/vit-base.json", dict(batch=64, mode="inference", dtype="fp16",
                                                         device="models/devices/l4.json")),
    ("t5-fwd-bwd", "models/t5-small.json", dict(batch=16, seq=256, mode="fwd-bwd", iterations=1000,
                                                 device="models/devices/t4.json")),
    ("qwen2-raw", "models/qwen2-0.5b.json", dict(batch=8, seq=1024, dtype="bf16", raw=True,
                                                 device="models/devices/h200-sxm.json")),
    ("gpt2-sgd-headroom", "models/gpt2-medium.json", dict(batch=4, seq=1024, optimizer="sgd", headroom=0.2,
                                                           device="models/devices/rtx-4090.json")),
    ("gpt2-input-pipeline", "models/gpt2.json", dict(batch=64, seq=128, device=H100, workers=2,
                                                      pipeline="docs/results/pipeline/calibration.json")),
    ("llama-parallel", "models/llama-style.json", dict(batch=4, seq=2048, dtype="bf16", gpus=8, tp=2, pp=2,
                                                       microbatches=4, device=H100)),
    ("mixtral-parallel-ep", "models/mixtral-8x7b.json", dict(batch=2, seq=1024, dtype="bf16", gpus=16, pp=2,
                                                             ep=8, zero=1, recompute=True, device=H100)),
]

SWEEPS = [
    ("batch-seq-gpus", "models/gpt2.json", dict(batch=[4, 8], seq=[128, 256], device=[H100, A100])),
    ("config-key", "models/gpt2.json", {"batch": 8, "device": H100, "config.n_layer": [6, 12]}),
]


@pytest.fixture(scope="module")
def cli_single():
    return dict(zip([c[0] for c in SINGLE], cli_many([cli_args(m, o) for _, m, o in SINGLE])))


@pytest.fixture(scope="module")
def cli_sweeps():
    return dict(zip([c[0] for c in SWEEPS], cli_many([cli_args(m, o) for _, m, o in SWEEPS])))


def assert_same(cli, mine, where="", rel=0.0):
    """Equal dicts (numbers within `rel` of each other); on a difference, the differing key paths."""
    if cli == mine:
        return
    diffs = []

    def walk(a, b, path):
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                walk(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif isinstance(a, float) and isinstance(b, float) and rel > 0:
            if abs(a - b) > rel * max(abs(a), abs(b)):
                diffs.append(f"{path}: CLI {a!r}, module {b!r}")
        elif a != b:
            diffs.append(f"{path}: CLI {a!r}, module {b!r}")

    walk(cli, mine, where)
    if diffs:
        raise AssertionError("\n".join(diffs[:20]))


def split_config(options):
    opts = {k: v for k, v in options.items() if not k.startswith("config.")}
    config = {k[len("config."):]: v for k, v in options.items() if k.startswith("config.")}
    return opts, config or None


@pytest.mark.parametrize("case", [c[0] for c in SINGLE])
def test_predict_equals_cli_json(exact_bundle, cli_single, case):
    _, model, options = next(c for c in SINGLE if c[0] == case)
    p = exact_bundle.predict(model, **options)
    assert_same(cli_single[case], p.json, case)
    assert p.t_iter_ms == cli_single[case]["t_iter_ms"]  # the top-level keys as attributes
    assert_same(cli_single[case], exact_bundle.predict(model, **options).json, case + " (again)")


@pytest.mark.parametrize("case", [c[0] for c in SWEEPS])
def test_sweep_equals_cli_json(exact_bundle, cli_sweeps, case):
    _, model, options = next(c for c in SWEEPS if c[0] == case)
    opts, config = split_config(options)
    assert_same(cli_sweeps[case], [r.json for r in exact_bundle.sweep(model, config=config, **opts)], case)


def test_warm_bundle_equals_cli_up_to_float32_rounding(bundle, cli_single, cli_sweeps):
    """memo=True: the same keys, strings and integers; numbers within 1e-6 (a configuration whose
    smaller ones the memo holds is refined alone, not in a batch with them)."""
    for _ in range(2):
        for case, model, options in SINGLE:
            assert_same(cli_single[case], bundle.predict(model, **options).json, case, rel=1e-6)
        for case, model, options in SWEEPS:
            opts, config = split_config(options)
            rows = [r.json for r in bundle.sweep(model, config=config, **opts)]
            assert_same(cli_sweeps[case], rows, case, rel=1e-6)


def test_single_results_have_the_documented_keys(bundle, cli_single):
    p = bundle.predict("models/bert-base.json", batch=32, seq=128, dtype="bf16", samples=100000, device=A100)
    for key in ("t_iter_ms", "t_epoch_s", "interval_ms", "memory", "by_type_ms", "ood_distance", "adjusted"):
        assert key in p.json, key
        assert getattr(p, key) == p.json[key]
    assert p.t_epoch_s > 0 and p.memory["peak_bytes"] > 0
    with pytest.raises(AttributeError):
        p.no_such_key


def test_report_is_the_cli_text(bundle):
    args = cli_args("models/gpt2.json", dict(batch=8, seq=512, device=H100))
    r = run_cli(args)
    assert r.returncode == 0, r.stderr
    assert bundle.predict("models/gpt2.json", batch=8, seq=512, device=H100).report() == r.stdout


def test_every_cli_flag_is_known(scaledl):
    """A flag `scaledl predict --help` lists is one predict() takes (python/src/module.cpp copies
    cmd_predict.cpp's list: this is what says when it must grow)."""
    r = run_cli(["predict", "--help"])
    assert r.returncode == 0, r.stderr
    options = re.findall(r"^\s+(?:-\w, ?)?(--[a-z][a-z0-9-]*)", r.stdout, flags=re.M)
    cli = set(options) - {"--help", "--json", "--timing"}
    assert cli, r.stdout
    missing = cli - set(scaledl._core.predict_flags())
    assert not missing, f"add to add_predict_options in python/src/module.cpp: {sorted(missing)}"


def test_bundle_path_is_the_cli_bundle(scaledl):
    assert scaledl.Bundle(BUNDLE).path == BUNDLE
