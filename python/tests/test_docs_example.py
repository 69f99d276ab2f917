"""docs/python.md's example runs as written: its ```python cells, in order, in one namespace."""

import os
import re

import pytest
from conftest import ROOT


def test_docs_example_runs(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="Debian: python3-matplotlib (the example plots)")
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        cells = re.findall(r"^```python\n(.*?)^```$", f.read(), flags=re.S | re.M)
    assert len(cells) >= 3
    monkeypatch.chdir(tmp_path)  # the figure lands here; names, not paths, find the models
    namespace = {}
    for cell in cells:
        exec(compile(cell, "docs/python.md", "exec"), namespace)
    assert (tmp_path / "gpt2-medium-sweep.png").stat().st_size > 10000
    assert len(namespace["rows"]) == 3
