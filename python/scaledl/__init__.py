"""ScaleDL from Python: predict the training time of a Hugging Face model config on a GPU.

    import scaledl
    b = scaledl.Bundle("models/bundles/default")          # load once (~0.5 s)
    p = b.predict("models/gpt2.json", batch=8, seq=512, device="h100-sxm")
    p.t_iter_ms, p.interval_ms["80"], p.memory["peak_gb"]  # the keys of `scaledl predict --json`
    rows = b.sweep("models/gpt2.json", batch=[4, 8, 16], seq=[256, 1024],
                   device=["h100-sxm", "a100-sxm4-80gb"])  # `--sweep`, one Row per configuration
    g = scaledl.inspect("models/gpt2.json", batch=8)      # `scaledl inspect --json`

Every keyword argument is a flag of `scaledl predict` (docs/predict.md) with `_` for `-`:
`host_node_us=2.5` is `--host-node-us 2.5`, `raw=True` is `--raw`, `gpus=8, tp=2` is
`--gpus 8 --tp 2`. The flags are parsed by the CLI's own parser, so a bad value raises
`scaledl.Error` with the line `scaledl` would print after "scaledl: error: ".

`model` is a config.json path, a Hugging Face config dict (`AutoConfig...to_dict()`) or the name
of a shipped config ("gpt2" = models/gpt2.json); `device` a spec JSON path, a spec dict or the name
of a shipped spec sheet ("h100-sxm" = models/devices/h100-sxm.json). docs/python.md has the rest,
thread safety included.
"""

import atexit
import hashlib
import json as _json
import numbers
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Mapping

from . import _core, _paths

__all__ = [
    "Bundle",
    "Error",
    "Graph",
    "Prediction",
    "Result",
    "Row",
    "ScaleDLWarning",
    "devices",
    "inspect",
    "models",
    "models_dirs",
]

#: Raised for every bad input, with the CLI's one-line message (a ValueError).
Error = _core.Error
Error.__module__ = __name__


class ScaleDLWarning(UserWarning):
    """What `scaledl predict` prints as "scaledl: warning: ..." on stderr."""


# ---- the shipped models/ folder ------------------------------------------------------------------


def models_dirs():
    """The models/ folders names are resolved in, in order: $SCALEDL_MODELS (os.pathsep-separated),
    the one this module was built or installed with, then ./models."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = [d for d in os.environ.get("SCALEDL_MODELS", "").split(os.pathsep) if d]
    out += [d if os.path.isabs(d) else os.path.normpath(os.path.join(here, d)) for d in _paths.MODELS_DIRS]
    out.append("models")
    seen, dirs = set(), []
    for d in out:
        if os.path.isdir(d) and os.path.realpath(d) not in seen:
            seen.add(os.path.realpath(d))
            dirs.append(d)
    return dirs


def _shipped(kind, name, suffix):
    """models/<kind>/<name><suffix> (kind "" = models/ itself) in the first folder that has it."""
    if not name or os.sep in name or (os.altsep and os.altsep in name):
        return None
    file = name if suffix and name.endswith(suffix) else name + suffix
    for d in models_dirs():
        p = os.path.join(d, kind, file)
        if os.path.exists(p):
            return p
    return None


def _names(kind, test):
    out = set()
    for d in models_dirs():
        folder = os.path.join(d, kind)
        if os.path.isdir(folder):
            out.update(os.path.splitext(f)[0] for f in os.listdir(folder) if test(os.path.join(folder, f)))
    return sorted(out)


def devices():
    """Names of the shipped spec sheets (models/devices/*.json), for `device=`."""
    return _names("devices", lambda p: p.endswith(".json") and os.path.isfile(p))


def models():
    """Names of the shipped model configs (models/*.json), for `model`."""
    return _names("", lambda p: p.endswith(".json") and os.path.isfile(p))


# ---- dicts as files: the library reads configs and spec sheets from files --------------------------

_tmp_lock = threading.Lock()
_tmp_dir = None


def _tmp():
    global _tmp_dir
    with _tmp_lock:
        if _tmp_dir is None:
            _tmp_dir = tempfile.mkdtemp(prefix="scaledl-py-")
            atexit.register(shutil.rmtree, _tmp_dir, True)
            # A spec sheet's fabric presets are looked up in its ../fabrics (as for models/devices/).
            for d in models_dirs():
                if os.path.isdir(os.path.join(d, "fabrics")):
                    try:
                        os.symlink(os.path.abspath(os.path.join(d, "fabrics")), os.path.join(_tmp_dir, "fabrics"))
                    except OSError:
                        pass
                    break
        return _tmp_dir


def _dict_file(kind, what, value, stem=None):
    """`value` written once (by content) as <tmp>/<kind>/<sha>/<stem>.json; its path."""
    try:
        text = _json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise Error(f"{what}: the dict is not JSON ({e})") from None
    sha = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = os.path.join(_tmp(), kind, sha) if stem else os.path.join(_tmp(), kind)
    path = os.path.join(folder, f"{stem or sha}.json")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        part = f"{path}.{os.getpid()}.{threading.get_ident()}.part"
        with open(part, "w") as f:
            f.write(text)
        os.replace(part, path)
    return path


def _model_name(config, name):
    if name is None:
        name = config.get("_name_or_path") or config.get("name_or_path") or config.get("model_type") or "model"
        name = str(name).rstrip("/").split("/")[-1]
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", str(name)).strip(".") or "model"
    return name


def _model(model, name=None):
    """A model config path (the library reads it) for a path, a config dict or a shipped name."""
    if isinstance(model, Mapping):
        return _dict_file("models", "model", dict(model), _model_name(model, name))
    if name is not None:
        raise Error("name= names a config dict's model; a config file is named by its file name")
    if not isinstance(model, (str, os.PathLike)):
        raise Error(f"model={model!r}: give a config.json path, a config dict or a shipped name (scaledl.models())")
    p = os.fspath(model)
    if not os.path.exists(p):
        p = _shipped("", p, ".json") or p
    return p


def _device(device):
    """A spec path for a path, a spec dict or a shipped sheet's name; anything else is left to the
    library, which names it as the CLI does."""
    if isinstance(device, Mapping):
        return _dict_file("devices", "device", dict(device))
    if not isinstance(device, (str, os.PathLike)):
        raise Error(f"device={device!r}: give a spec JSON path, a spec dict or a shipped name (scaledl.devices())")
    p = os.fspath(device)
    if not os.path.exists(p):
        p = _shipped("devices", p, ".json") or p
    return p


# ---- keyword arguments to the CLI's tokens ---------------------------------------------------------

#: What load_predict_bundle reads: fixed when the bundle loads.
_LOAD = ("bundle", "layers", "graph", "comm", "anchor", "host_node_us", "calibrate")
_SEQUENCE = (list, tuple, range)


def _text(key, v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if isinstance(v, (str, os.PathLike)):
        return os.fspath(v)
    raise Error(f"{key}={v!r}: give a number or a string")


def _flag(key):
    return "--" + key.replace("_", "-")


def _tokens(options, many):
    """`options` (flag name -> value, None = not given) as the tokens after `scaledl predict`.
    With `many` (a sweep), a list of values is a --sweep KEY=V1,V2,... ."""
    out = []
    for key, v in options.items():
        if v is None or v is False:
            continue
        if key == "config" and many:
            if not isinstance(v, Mapping):
                raise Error("config= takes a dict: config key -> a value or a list of values (--sweep config.<key>=...)")
            for k, vals in v.items():
                vals = list(vals) if isinstance(vals, _SEQUENCE) else [vals]
                out.append("--sweep=config." + k + "=" + ",".join(_text(f"config.{k}", x) for x in vals))
            continue
        if key == "sweep":  # raw --sweep KEY=V1,... strings
            for s in [v] if isinstance(v, str) else v:
                out.append("--sweep=" + _text(key, s))
            continue
        if isinstance(v, _SEQUENCE):
            if not many:
                raise Error(f"{key}={list(v)!r}: predict() takes one value per option; Bundle.sweep() takes lists")
            if key == "device":
                key = "device_spec"
            out.append("--sweep=" + key + "=" + ",".join(_text(key, x) for x in v))
            continue
        if v is True:
            out.append(_flag(key))
            continue
        out.append(_flag(key) + "=" + _text(key, v))
    return out


def _where(options):
    """`device` is a spec (--device-spec) unless a --db is given: then its key (--device)."""
    o = dict(options)
    if o.get("device") is not None and o.get("db") is None:
        o["device_spec"] = o.pop("device")
    if o.get("device_spec") is not None:
        v = o["device_spec"]
        o["device_spec"] = [_device(x) for x in v] if isinstance(v, _SEQUENCE) else _device(v)
    return o


def _warn(messages):
    for m in messages:
        warnings.warn(m, ScaleDLWarning, stacklevel=3)


# ---- results ---------------------------------------------------------------------------------------


class Result:
    """A result: `.json` is the dict `scaledl ... --json` prints (json.loads of it, numbers equal);
    its top-level keys are attributes too (`p.t_iter_ms`), and items (`p["t_iter_ms"]`)."""

    __slots__ = ("json", "_native")

    def __init__(self, data, native=None):
        self.json = data
        self._native = native

    def __getattr__(self, name):
        if name in ("json", "_native") or name.startswith("__"):
            raise AttributeError(name)
        try:
            return self.json[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no key {name!r} (.json.keys(): "
                                 f"{', '.join(sorted(self.json))})") from None

    def __getitem__(self, key):
        return self.json[key]

    def __contains__(self, key):
        return key in self.json

    def __iter__(self):
        return iter(self.json)

    def __len__(self):
        return len(self.json)

    def keys(self):
        return self.json.keys()

    def get(self, key, default=None):
        return self.json.get(key, default)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | {k for k in self.json if k.isidentifier()})

    def __getstate__(self):
        return {"json": self.json}

    def __setstate__(self, state):
        self.json = state["json"]
        self._native = None

    def _summary(self):
        keys = ("model", "device", "t_iter_ms", "t_epoch_s")
        return ", ".join(f"{k}={self.json[k]!r}" for k in keys if self.json.get(k) is not None)

    def __repr__(self):
        return f"{type(self).__name__}({self._summary()})"


class Prediction(Result):
    """One configuration (`Bundle.predict`): the keys of `scaledl predict --json`
    (t_iter_ms, t_epoch_s, interval_ms, memory, by_type_ms, ood_distance, adjusted, ...; with
    gpus= the keys of the parallel prediction)."""

    def report(self):
        """The text `scaledl predict` prints without --json."""
        if self._native is None:
            raise Error("report(): this prediction was unpickled; its report stayed with the original")
        return self._native.report()

    def __str__(self):
        return self.report() if self._native is not None else repr(self)


class Row(Result):
    """One configuration of a sweep: an element of `scaledl predict --sweep ... --json`."""


class Graph(Result):
    """The layer graph of one iteration (`scaledl inspect --json`)."""

    def _summary(self):
        return ", ".join(f"{k}={self.json[k]!r}" for k in ("params", "flops_fwd", "flops_bwd") if k in self.json)


# ---- the API ---------------------------------------------------------------------------------------


class Bundle:
    """A loaded bundle: `scaledl predict --bundle PATH` without reloading it for every prediction.

    Bundle(path=None, memo=True, **options): `path` is a bundle folder or the name of a shipped one
    (None = models/bundles/default). Options that change the loaded models are given here only:
    layers=, graph= (instead of a bundle), comm=, anchor=, host_node_us=, calibrate= (with
    device=). Any other option given here is a default of every predict() and sweep()
    (device="h100-sxm").

    memo: keep the physical bounds' memo (the smaller configurations already predicted) across
    calls: fast, and equal to `scaledl predict` up to the refinement's float32 rounding (a
    configuration is refined alone instead of in a batch with its smaller ones: |relative
    difference| < 1e-6). memo=False computes every call as a lone `scaledl predict` does, bit for
    bit (the ladder predicted again: ~50x slower; one call at a time). docs/python.md, "Equal to the CLI".

    Thread safety: predict() and sweep() release the GIL. Several threads may predict with one
    Bundle at once; they run in parallel when `concurrent` is True (every layer model predicts
    through compiled trees, read-only, and memo=True), else one at a time (a lock; XGBoost's
    predictor sets its thread count per call). docs/python.md, "Threads".
    """

    def __init__(self, path=None, *, memo=True, **options):
        options = _where(options)
        if path is None and options.get("layers") is None and options.get("bundle") is None:
            path = _shipped("bundles", "default", "")
            if path is None:
                raise Error("no bundle: give its folder (models/bundles/default was not found in "
                            + (", ".join(models_dirs()) or "any models/ folder") + "; set SCALEDL_MODELS)")
        if path is not None:
            if options.get("bundle") is not None:
                raise Error("give the bundle once: Bundle(path) or Bundle(bundle=path)")
            p = os.fspath(path)
            options["bundle"] = p if os.path.exists(p) else (_shipped("bundles", p, "") or p)
        self.path = options.get("bundle")
        self._defaults = {k: v for k, v in options.items() if k not in _LOAD}
        self._native = _core.Bundle(_tokens(options, many=False), bool(memo))

    @property
    def concurrent(self):
        """True when predictions on several threads run in parallel (else one at a time)."""
        return self._native.concurrent

    @property
    def memo(self):
        """Whether the bounds' memo is kept across calls (see the class)."""
        return self._native.memo

    @property
    def manifest(self):
        """The bundle's manifest.json (training data, components, checksums)."""
        return self._native.manifest

    def _options(self, call):
        for k in _LOAD:
            if call.get(k) is not None:
                raise Error(f"{k}= changes the loaded models: give it to scaledl.Bundle(..., {k}=...)")
        # device= is a --db key when this call or the bundle names a --db and the call names no spec
        db_known = call.get("db") is not None or (self._defaults.get("db") is not None
                                                  and call.get("device_spec") is None)
        call = dict(call)
        if call.get("device") is not None and not db_known:
            call["device_spec"] = call.pop("device")
        call = _where(call)
        merged = dict(self._defaults)
        if any(call.get(k) is not None for k in ("device_spec", "db")):
            for k in ("device_spec", "db", "device"):
                merged.pop(k, None)
        merged.update(call)
        return merged

    def predict(self, model, *, name=None, **options):
        """One configuration: the dict of `scaledl predict MODEL ... --json` as a Prediction.

        model: config path, config dict (name= names it) or shipped name. options: the flags of
        `scaledl predict` (batch=, seq=, image=, dtype=, mode=, optimizer=, device=, samples=,
        iterations=, gpus=, tp=, pp=, microbatches=, zero=, fabric=, raw=, headroom=, ...)."""
        o = self._options(options)
        m = _model(model, name)
        tokens = ([m] if not m.startswith("-") else []) + _tokens(o, many=False)
        if m.startswith("-"):
            tokens += ["--", m]
        r = self._native.predict(tokens)
        _warn(r.warnings)
        return Prediction(r.to_dict(), r)

    def sweep(self, model=None, *, name=None, **options):
        """Many configurations: a list of the values of an option is a --sweep over them, and every
        combination is predicted (`scaledl predict MODEL --sweep ... --json`): one Row each, in the
        CLI's order. device=[...] sweeps spec sheets; config={"num_hidden_layers": [12, 24]} sweeps
        config keys; csv="configs.csv" predicts a CSV's rows; sweep=["batch=8,16"] is --sweep as is."""
        o = self._options(options)
        tokens = []
        if model is not None:
            m = _model(model, name)
            tokens = [m] if not m.startswith("-") else []
        tokens += _tokens(o, many=True)
        if model is not None and m.startswith("-"):
            tokens += ["--", m]
        rows, msgs = self._native.sweep(tokens)
        _warn(msgs)
        return [Row(r) for r in rows]

    def __repr__(self):
        return f"scaledl.Bundle({self.path!r})"


def inspect(model, *, name=None, **options):
    """The layer graph of one training iteration, as `scaledl inspect MODEL --json`: options are
    its flags (batch=, seq=, image=, dtype=, mode=, optimizer=, ...)."""
    m = _model(model, name)
    tokens = ([m] if not m.startswith("-") else []) + _tokens(options, many=False)
    if m.startswith("-"):
        tokens += ["--", m]
    return Graph(_core.inspect(tokens))
