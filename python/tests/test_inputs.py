"""Models and devices as paths, dicts and names; bad inputs raise scaledl.Error with the CLI's line."""

import json
import os
import subprocess
import sys
import threading

import pytest
from conftest import BUNDLE, cli_args, cli_error, cli_json, cli_many

H100 = "models/devices/h100-sxm.json"


def load(path):
    with open(path) as f:
        return json.load(f)


def autoconfig_dict():
    """GPT-2's config as transformers' AutoConfig.from_pretrained("gpt2").to_dict() gives it: the
    file's keys plus PretrainedConfig's own (nulls, generation defaults, label maps)."""
    d = load("models/gpt2.json")
    d.update({
        "_name_or_path": "gpt2", "return_dict": True, "output_hidden_states": False,
        "output_attentions": False, "torchscript": False, "torch_dtype": None, "use_bfloat16": False,
        "tf_legacy_loss": False, "pruned_heads": {}, "tie_word_embeddings": True,
        "chunk_size_feed_forward": 0, "is_encoder_decoder": False, "is_decoder": False,
        "cross_attention_hidden_size": None, "add_cross_attention": False, "tie_encoder_decoder": False,
        "max_length": 20, "min_length": 0, "do_sample": False, "early_stopping": False, "num_beams": 1,
        "num_beam_groups": 1, "diversity_penalty": 0.0, "temperature": 1.0, "top_k": 50, "top_p": 1.0,
        "typical_p": 1.0, "repetition_penalty": 1.0, "length_penalty": 1.0, "no_repeat_ngram_size": 0,
        "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None, "num_return_sequences": 1,
        "output_scores": False, "return_dict_in_generate": False, "forced_bos_token_id": None,
        "forced_eos_token_id": None, "remove_invalid_values": False, "exponential_decay_length_penalty": None,
        "suppress_tokens": None, "begin_suppress_tokens": None, "finetuning_task": None,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"}, "label2id": {"LABEL_0": 0, "LABEL_1": 1},
        "tokenizer_class": None, "prefix": None, "pad_token_id": None, "sep_token_id": None,
        "decoder_start_token_id": None, "problem_type": None, "transformers_version": "4.44.2",
    })
    return d


@pytest.fixture(scope="module")
def gpt2_cli():
    return cli_json(cli_args("models/gpt2.json", dict(batch=8, seq=256, device=H100)))


def test_config_dict_predicts_as_its_file(exact_bundle, gpt2_cli):
    p = exact_bundle.predict(load("models/gpt2.json"), name="gpt2", batch=8, seq=256, device=H100)
    assert p.json == gpt2_cli


def test_autoconfig_to_dict_predicts_as_the_file(exact_bundle, gpt2_cli):
    """The dict transformers gives (named by its _name_or_path): the same prediction as the file."""
    p = exact_bundle.predict(autoconfig_dict(), batch=8, seq=256, device=H100)
    assert p.json == gpt2_cli


def test_config_dict_in_a_sweep_and_inspect(bundle, scaledl):
    rows = bundle.sweep(autoconfig_dict(), batch=[4, 8], seq=256, device=H100)
    assert [r.model for r in rows] == ["gpt2", "gpt2"]
    assert [r.settings["batch"] for r in rows] == [4, 8]
    assert scaledl.inspect(autoconfig_dict(), batch=8).json == scaledl.inspect("models/gpt2.json", batch=8).json


def test_spec_dict_and_names_predict_as_the_file(exact_bundle, gpt2_cli, scaledl):
    bundle = exact_bundle
    assert bundle.predict("models/gpt2.json", batch=8, seq=256, device=load(H100)).json == gpt2_cli
    # a shipped sheet's name and a shipped config's name are those files
    assert "h100-sxm" in scaledl.devices() and "gpt2" in scaledl.models()
    by_name = bundle.predict("gpt2", batch=8, seq=256, device="h100-sxm")
    assert by_name.json == gpt2_cli


def test_names_on_a_parallel_prediction_find_the_fabric(exact_bundle):
    """A sheet by name, by path and as a dict: the same fabric preset (its ../fabrics)."""
    opts = dict(batch=4, seq=1024, dtype="bf16", gpus=16, tp=2)
    cli = cli_json(cli_args("models/llama-style.json", dict(opts, device=os.path.abspath(H100))))
    assert exact_bundle.predict("llama-style", device="h100-sxm", **opts).json == cli
    p = exact_bundle.predict("llama-style", device=load(H100), **opts)
    assert p.t_iter_ms == cli["t_iter_ms"] and p.collectives == cli["collectives"]


def test_bundle_defaults_and_overrides(scaledl, gpt2_cli):
    b = scaledl.Bundle(BUNDLE, device="h100-sxm", batch=8)
    assert b.predict("models/gpt2.json", seq=256).json == gpt2_cli
    assert b.predict("models/gpt2.json", seq=256, batch=4).settings["batch"] == 4
    assert b.predict("models/gpt2.json", seq=256, device="a100-sxm4-80gb").device != gpt2_cli["device"]


def test_a_call_leaves_no_option_to_the_next(exact_bundle, gpt2_cli):
    """The module parses with one parser per thread (module.cpp, PredictParser): what one call set
    (a dtype, a mode, a recipe, an epoch) is back to the CLI's default in the next call."""
    other = exact_bundle.predict("models/gpt2.json", batch=2, seq=128, device=H100, dtype="bf16", mode="fwd-bwd",
                                 framework="megatron", samples=1000, gpus=2)
    assert other.settings["dtype"] == "bf16"
    assert exact_bundle.predict("models/gpt2.json", batch=8, seq=256, device=H100).json == gpt2_cli
    with pytest.raises(ValueError):
        exact_bundle.predict("models/gpt2.json", batch=8, seq=256, device=H100, dtype="fp5")
    assert exact_bundle.predict("models/gpt2.json", batch=8, seq=256, device=H100).json == gpt2_cli


def test_default_bundle(scaledl, gpt2_cli):
    if os.path.realpath(BUNDLE) != os.path.realpath("models/bundles/default"):
        pytest.skip("SCALEDL_TEST_BUNDLE is not the default bundle")
    assert scaledl.Bundle().predict("gpt2", batch=8, seq=256, device="h100-sxm").json == gpt2_cli


# ---- errors: scaledl.Error, the CLI's message ---------------------------------------------------

# (id, model, options): each a bad input; the message must be the CLI's for the same flags.
BAD = [
    ("batch-0", "models/gpt2.json", dict(batch=0, device=H100)),
    ("dtype", "models/gpt2.json", dict(dtype="fp7", device=H100)),
    ("mode", "models/gpt2.json", dict(mode="eval", device=H100)),
    ("no-model-file", "models/no-such-model.json", dict(device=H100)),
    ("no-device-file", "models/gpt2.json", dict(device="models/devices/no-such-gpu.json")),
    ("seq-on-vision", "models/vit-base.json", dict(seq=128, device=H100)),
    ("samples-and-iterations", "models/gpt2.json", dict(samples=10, iterations=10, device=H100)),
    ("headroom", "models/gpt2.json", dict(headroom=1.5, device=H100)),
    ("parallel-split", "models/gpt2.json", dict(gpus=3, tp=2, device=H100)),
    ("devices-without-comm", "models/gpt2.json", dict(devices=4, device=H100)),
    ("integer-overflow", "models/gpt2.json", dict(samples=99999999999999999999, device=H100)),
    ("optimizer-in-inference", "models/gpt2.json", dict(mode="inference", optimizer="adam", device=H100)),
]


@pytest.fixture(scope="module")
def cli_errors():
    return dict(zip([c[0] for c in BAD], cli_many([cli_args(m, o) for _, m, o in BAD], kind=cli_error)))


@pytest.mark.parametrize("case", [c[0] for c in BAD])
def test_bad_input_raises_the_cli_message(bundle, scaledl, cli_errors, case):
    _, model, options = next(c for c in BAD if c[0] == case)
    with pytest.raises(scaledl.Error) as e:
        bundle.predict(model, **options)
    assert str(e.value) == cli_errors[case]


def test_error_is_a_value_error(scaledl):
    assert issubclass(scaledl.Error, ValueError)
    assert scaledl.Error.__module__ == "scaledl"


def test_unknown_option_is_the_cli_message(bundle, scaledl):
    msg = cli_error(["predict", "models/gpt2.json", "--bundle", BUNDLE, "--device-spec", H100, "--no-such-flag=1"])
    with pytest.raises(scaledl.Error) as e:
        bundle.predict("models/gpt2.json", device=H100, no_such_flag=1)
    assert str(e.value) == msg


def test_bad_bundle_is_the_cli_message(scaledl):
    msg = cli_error(["predict", "models/gpt2.json", "--bundle", "models/no-such-bundle", "--device-spec", H100])
    with pytest.raises(scaledl.Error) as e:
        scaledl.Bundle("models/no-such-bundle")
    assert str(e.value) == msg


def test_bad_inputs_of_the_python_side(bundle, scaledl):
    with pytest.raises(scaledl.Error, match="Bundle.sweep"):
        bundle.predict("models/gpt2.json", batch=[4, 8], device=H100)
    with pytest.raises(scaledl.Error, match="changes the loaded models"):
        bundle.predict("models/gpt2.json", comm="comm.json", device=H100)
    with pytest.raises(scaledl.Error, match="not JSON"):
        bundle.predict({"model_type": "gpt2", "n_layer": float("nan")}, device=H100)
    with pytest.raises(scaledl.Error, match="model="):
        bundle.predict(42, device=H100)
    with pytest.raises(scaledl.Error):
        scaledl.inspect("models/gpt2.json", batch=0)


def test_inspect_is_the_cli_json(scaledl):
    r = subprocess.run([os.environ.get("SCALEDL_CLI") or "build/tools/scaledl", "inspect", "models/bert-base.json",
                        "--batch", "4", "--seq", "64", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert scaledl.inspect("models/bert-base.json", batch=4, seq=64).json == json.loads(r.stdout)


# ---- threads ----------------------------------------------------------------------------------


def test_concurrent_predictions_equal_serial_ones(scaledl):
    """Several threads on one Bundle (the GIL released): each result is the serial one. (A warm
    bundle: every configuration predicted twice first, so that each is refined alone, as below.)"""
    bundle = scaledl.Bundle(BUNDLE)
    assert bundle.concurrent  # the shipped bundle's trees all compile: the threads run at once
    cases = [("models/gpt2.json", dict(batch=b, seq=s, device=d))
             for b in (2, 8) for s in (128, 512) for d in (H100, "models/devices/a100-sxm4-80gb.json")]
    serial = [bundle.predict(m, **o).json for m, o in cases]
    serial = [bundle.predict(m, **o).json for m, o in cases]
    got = [None] * len(cases)
    errors = []

    def work(i):
        try:
            for _ in range(3):
                got[i] = bundle.predict(cases[i][0], **cases[i][1]).json
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert got == serial


# ---- interpreters -------------------------------------------------------------------------------


@pytest.mark.parametrize("python", sorted({"python3", "/usr/bin/python3", sys.executable}))
def test_module_imports_in_each_python3(python):
    """The extension links no libpython: every CPython of its version imports it (a pyenv python3
    first on PATH and Debian's /usr/bin/python3 alike)."""
    import sysconfig

    probe = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"{python}: not runnable")
    if probe.stdout.strip() != sysconfig.get_config_var("EXT_SUFFIX"):
        pytest.skip(f"{python} is another Python version ({probe.stdout.strip()})")
    r = subprocess.run([python, "-c", "import scaledl; print(scaledl.inspect('gpt2', batch=2).params)"],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert float(r.stdout) > 1e8
