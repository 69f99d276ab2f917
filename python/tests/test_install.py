"""`cmake --install BUILD --prefix P` puts the package where python3 finds it with
PYTHONPATH=P/lib/python3.X/site-packages (docs/python.md, "Install")."""

import glob
import os
import subprocess
import sys

import pytest
from conftest import BUNDLE, ROOT


def test_installed_module_imports_and_predicts(tmp_path):
    build = os.environ.get("SCALEDL_BUILD_DIR") or os.path.join(ROOT, "build")
    if not os.path.isfile(os.path.join(build, "cmake_install.cmake")):
        pytest.skip(f"no build in {build} (SCALEDL_BUILD_DIR)")
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", build, "--prefix", str(prefix), "--component", "python"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    site = glob.glob(str(prefix / "lib" / "python*" / "site-packages"))
    assert len(site) == 1, os.listdir(prefix)
    code = ("import scaledl, sys; b = scaledl.Bundle(sys.argv[1]); "
            "print(scaledl.__file__); print(b.predict(sys.argv[2], batch=2, seq=64, device=sys.argv[3]).t_iter_ms)")
    env = dict(os.environ, PYTHONPATH=site[0])
    env.pop("SCALEDL_MODELS", None)
    r = subprocess.run([sys.executable, "-c", code, os.path.abspath(BUNDLE), os.path.abspath("models/gpt2.json"),
                        os.path.abspath("models/devices/h100-sxm.json")],
                       capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    where, t_iter = r.stdout.split()
    assert where.startswith(str(prefix)) and float(t_iter) > 0
    # the installed package names no folder of the source tree: names resolve in P/share/scaledl/models,
    # $SCALEDL_MODELS or ./models
    with open(os.path.join(os.path.dirname(where), "_paths.py")) as f:
        assert ROOT not in f.read()
    env["SCALEDL_MODELS"] = os.path.join(ROOT, "models")
    r = subprocess.run([sys.executable, "-c", "import scaledl; print(scaledl.inspect('gpt2', batch=2).params)"],
                       capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
