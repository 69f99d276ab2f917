"""Fixtures of the scaledl module's tests (python/CMakeLists.txt registers them with CTest as
Python.scaledl; scripts/test.sh runs them). By hand, from the repository root:

    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q python/tests

Environment: SCALEDL_CLI (default build/tools/scaledl), SCALEDL_TEST_BUNDLE (default
models/bundles/default). They run in the repository root (relative paths as in the docs)."""

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.chdir(ROOT)
CLI = os.environ.get("SCALEDL_CLI") or os.path.join(ROOT, "build", "tools", "scaledl")
BUNDLE = os.environ.get("SCALEDL_TEST_BUNDLE") or "models/bundles/default"
ERROR = "scaledl: error: "


def cli_args(model, options):
    """The command line `scaledl predict` gets for `Bundle(BUNDLE).predict(model, **options)`:
    written independently of the module (device= is --device-spec; a list is a --sweep)."""
    args = ["predict"] + ([model] if model is not None else []) + ["--bundle", BUNDLE]
    for k, v in options.items():
        if k == "device":
            k = "device_spec"
        if isinstance(v, list):
            args += ["--sweep", k + "=" + ",".join(str(x) for x in v)]
        elif v is True:
            args.append("--" + k.replace("_", "-"))
        else:
            args += ["--" + k.replace("_", "-"), str(v)]
    return args


def run_cli(args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([CLI] + list(args), capture_output=True, text=True, env=env)


def cli_json(args):
    r = run_cli(list(args) + ["--json"])
    assert r.returncode == 0, f"{' '.join(args)}: {r.stderr}"
    return json.loads(r.stdout)


def cli_error(args):
    """The message of `scaledl ARGS`' one error line, after "scaledl: error: "."""
    r = run_cli(args)
    assert r.returncode == 1, f"{' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}"
    lines = [line for line in r.stderr.splitlines() if line.startswith(ERROR)]
    assert len(lines) == 1, r.stderr
    return lines[0][len(ERROR):]


def cli_many(arg_lists, kind=cli_json):
    """Several CLI runs at once (each loads the bundle: ~1 s)."""
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(kind, arg_lists))


@pytest.fixture(scope="session")
def scaledl():
    import scaledl as m

    return m


@pytest.fixture(scope="session")
def bundle(scaledl):
    """One bundle for the whole session (memo=True, the default): its memo of the physical bounds
    warms up across tests."""
    return scaledl.Bundle(BUNDLE)


@pytest.fixture(scope="session")
def exact_bundle(scaledl):
    """memo=False: every call computed as a lone `scaledl predict` computes it (bit for bit)."""
    return scaledl.Bundle(BUNDLE, memo=False)
