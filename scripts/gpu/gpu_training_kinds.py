#!/usr/bin/env python3
"""Times, on a lent GPU, what training as it is run today launches, in one call of the device
tool (issues #41 and #42; docs/gpu-data.md, "Our H200 training measurements"):

  gemm.csv       BF16 GEMMs of the AIConfigurator grid's shapes in the three layouts of a linear
                 layer's training (NT = forward y = x W^T, NN = dgrad dX = dY W, TN = wgrad
                 dW = dY^T X), each shape timed in all three, so that the layout's effect is measured
                 at the same (M, N, K), and FP8 (e4m3, per-tensor scales, torch._scaled_mm, NT: the
                 only layout cuBLASLt's FP8 GEMM takes) alone and with the activation's quantisation
                 (amax, scale, cast) as AIConfigurator's FP8 table times it;
  attention.csv  scaled_dot_product_attention forward and backward, causal and not, per backend
                 (FlashAttention, cuDNN, PyTorch's default choice);
  kernels.csv    the BF16 kernels around the GEMMs, forward and backward: LayerNorm, RMSNorm as
                 Hugging Face writes it and fused, GELU, SwiGLU, dropout, the residual add, the
                 cross-entropy over a vocabulary, the embedding;
  optimizer.csv  AdamW's step over FP32 parameters: fused, foreach and for-loop;
  hf-train.csv   whole training iterations of Hugging Face models as the Trainer runs them with
                 bf16=True: FP32 weights, autocast BF16, attn_implementation="sdpa", fused AdamW,
                 random token ids; plus forward-backward alone (the optimizer's share) and LoRA
                 runs (peft; BF16 base weights, FP32 adapters);
  profile.csv    the CUDA kernels of one iteration of a few of those runs (torch.profiler), summed
                 by kernel name.

Every row is written and flushed when measured; a section stops starting new work at its share
of --deadline-s, and a failure (out of memory, a model type the installed transformers lacks) is a
row with its status, not an abort.

    python3 scripts/gpu/gpu_training_kinds.py --out $OUT --deadline-s 480        # on the GPU
    /usr/bin/python3 scripts/gpu/gpu_training_kinds.py --out /tmp/dry --device cpu --small  # dry run

Timing: CUDA events around r back-to-back calls (r chosen so that a sample lasts >= --sample-ms),
5 samples after 2 warm-up calls; the row gives the median and the fastest sample per call. Whole
iterations: each iteration alone between two events, gradients set to None untimed before it.
"""
import argparse
import csv
import gc
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Clock:
    def __init__(self, deadline_s):
        self.t0 = time.time()
        self.deadline = deadline_s

    def elapsed(self):
        return time.time() - self.t0

    def before(self, share):
        """True while the run is inside `share` (0..1) of the deadline."""
        return self.elapsed() < share * self.deadline


class Writer:
    def __init__(self, path, fields, env):
        self.fh = open(path, "w", newline="")
        self.w = csv.DictWriter(self.fh, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
        self.w.writeheader()
        self.env = env
        self.n = 0

    def row(self, **kw):
        self.w.writerow({**self.env, **kw})
        self.fh.flush()
        self.n += 1


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, sample_ms=1.0, samples=5, warmup=2):
    """(median ms, min ms, cv, calls per sample) of fn()."""
    for _ in range(warmup):
        fn()
    sync(device)

    def sample(r):
        if device == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(r):
                fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / r
        t = time.perf_counter()
        for _ in range(r):
            fn()
        return (time.perf_counter() - t) * 1e3 / r

    est = sample(1)
    r = max(1, min(200, math.ceil(sample_ms / max(est, 1e-4))))
    ts = [sample(r) for _ in range(samples)]
    med = statistics.median(ts)
    cv = statistics.pstdev(ts) / statistics.mean(ts) if len(ts) > 1 else 0.0
    return med, min(ts), cv, r


def fmt(v):
    return f"{v:.5g}" if isinstance(v, float) else v


# ---------------------------------------------------------------------------------------------
# GEMMs

def gemm_section(a, clock, env, dt):
    w = Writer(os.path.join(a.out, "gemm.csv"), ["gpu", "dtype", "variant", "layout", "m", "n", "k", "status",
                                                  "median_ms", "min_ms", "cv", "calls", "tflops", "note"], env)
    if a.small:
        ms, nks = [64, 128], [64, 128]
    else:
        ms = [256, 1024, 2048, 4096, 4097, 8192, 32768]
        nks = [512, 1024, 2048, 4096, 8192, 12288, 16384]
    dev = a.device
    shapes = [(m, n, k) for m in ms for n in nks for k in nks]
    fp8 = dev == "cuda" and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")
    for (m, n, k) in shapes:
        if not clock.before(a.share_gemm):
            w.row(dtype="bf16", variant="-", layout="-", m=m, n=n, k=k, status="skipped", note="time share")
            continue
        flop = 2.0 * m * n * k
        try:
            x = torch.randn(m, k, device=dev, dtype=dt)      # NT: A [M, K], B [N, K]
            wt = torch.randn(n, k, device=dev, dtype=dt)
            wn = torch.randn(k, n, device=dev, dtype=dt)     # NN: B [K, N]
            xt = torch.randn(k, m, device=dev, dtype=dt)     # TN: A stored [K, M]
            runs = {"NT": lambda: torch.matmul(x, wt.t()),
                    "NN": lambda: torch.matmul(x, wn),
                    "TN": lambda: torch.matmul(xt.t(), wn)}
            for lay, fn in runs.items():
                med, mn, cv, r = timed(fn, dev, a.sample_ms)
                w.row(dtype=a.dtype_name, variant="gemm", layout=lay, m=m, n=n, k=k, status="ok", median_ms=fmt(med),
                      min_ms=fmt(mn), cv=fmt(cv), calls=r, tflops=fmt(flop / med / 1e9))
            if fp8:
                e4 = torch.float8_e4m3fn
                xq = x.to(e4)
                wq = wt.to(e4)
                one = torch.ones((), device=dev, dtype=torch.float32)
                g = lambda: torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                med, mn, cv, r = timed(g, dev, a.sample_ms)
                w.row(dtype="fp8", variant="gemm", layout="NT", m=m, n=n, k=k, status="ok", median_ms=fmt(med),
                      min_ms=fmt(mn), cv=fmt(cv), calls=r, tflops=fmt(flop / med / 1e9), note="e4m3 x e4m3 -> bf16")

                def quant_gemm():
                    amax = x.abs().amax().float()
                    s = (448.0 / torch.clamp(amax, min=1e-12))
                    q = (x.float() * s).to(e4) if a.unfused_cast else (x * s.to(x.dtype)).to(e4)
                    return torch._scaled_mm(q, wq.t(), scale_a=s.reciprocal(), scale_b=one, out_dtype=torch.bfloat16)
                med, mn, cv, r = timed(quant_gemm, dev, a.sample_ms)
                w.row(dtype="fp8", variant="quant+gemm", layout="NT", m=m, n=n, k=k, status="ok", median_ms=fmt(med),
                      min_ms=fmt(mn), cv=fmt(cv), calls=r, tflops=fmt(flop / med / 1e9),
                      note="amax + scale + cast of A (eager kernels) then the GEMM")
            del x, wt, wn, xt
        except Exception as e:  # noqa: BLE001 -- a row, the next shape still runs
            w.row(dtype=a.dtype_name, variant="-", layout="-", m=m, n=n, k=k, status="error",
                  note=f"{type(e).__name__}: {e}"[:200])
            free()
    print(f"gemm: {w.n} rows at {clock.elapsed():.0f} s", flush=True)


# ---------------------------------------------------------------------------------------------
# attention

def attention_backends():
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return {"default": None}, None
    return {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "default": None}, sdpa_kernel


def attention_section(a, clock, env, dt):
    w = Writer(os.path.join(a.out, "attention.csv"),
               ["gpu", "backend", "dtype", "batch", "heads", "kv_heads", "seq", "head_dim", "causal", "status",
                "fwd_ms", "fwdbwd_ms", "bwd_ms", "fwd_cv", "fwdbwd_cv", "note"], env)
    dev = a.device
    if a.small:
        shapes = [(1, 4, 2, 64, 32), (2, 4, 4, 128, 32)]
    else:
        shapes = [(b, h, kv, s, d) for (h, kv) in [(32, 8), (32, 32), (16, 16)] for d in [64, 128]
                  for (b, s) in [(8, 1024), (4, 2048), (2, 4096), (1, 8192)]]
    backends, ctx = attention_backends()
    if dev == "cpu":
        backends = {"default": None}
    for (b, h, kv, s, d) in shapes:
        for causal in (1, 0):
            for name, be in backends.items():
                if not clock.before(a.share_attention):
                    w.row(backend=name, dtype=a.dtype_name, batch=b, heads=h, kv_heads=kv, seq=s, head_dim=d,
                          causal=causal, status="skipped", note="time share")
                    continue
                try:
                    q = torch.randn(b, h, s, d, device=dev, dtype=dt, requires_grad=True)
                    k = torch.randn(b, kv, s, d, device=dev, dtype=dt, requires_grad=True)
                    v = torch.randn(b, kv, s, d, device=dev, dtype=dt, requires_grad=True)
                    g = torch.randn(b, h, s, d, device=dev, dtype=dt)
                    kw = {"is_causal": bool(causal)}
                    if kv != h:
                        kw["enable_gqa"] = True

                    def fwd():
                        return F.scaled_dot_product_attention(q, k, v, **kw)

                    def fb():
                        o = F.scaled_dot_product_attention(q, k, v, **kw)
                        torch.autograd.grad(o, (q, k, v), g)

                    def run(fn):
                        if be is None or ctx is None:
                            return timed(fn, dev, a.sample_ms)
                        with ctx(be):
                            return timed(fn, dev, a.sample_ms)
                    f = run(fwd)
                    fbt = run(fb)
                    w.row(backend=name, dtype=a.dtype_name, batch=b, heads=h, kv_heads=kv, seq=s, head_dim=d,
                          causal=causal, status="ok", fwd_ms=fmt(f[0]), fwdbwd_ms=fmt(fbt[0]),
                          bwd_ms=fmt(fbt[0] - f[0]), fwd_cv=fmt(f[2]), fwdbwd_cv=fmt(fbt[2]))
                except Exception as e:  # noqa: BLE001
                    w.row(backend=name, dtype=a.dtype_name, batch=b, heads=h, kv_heads=kv, seq=s, head_dim=d,
                          causal=causal, status="error", note=f"{type(e).__name__}: {e}"[:200])
                    free()
    print(f"attention: {w.n} rows at {clock.elapsed():.0f} s", flush=True)


# ---------------------------------------------------------------------------------------------
# the kernels around the GEMMs

def hf_rmsnorm(x, weight, eps=1e-6):
    """LlamaRMSNorm.forward as transformers writes it (several eager kernels)."""
    dtype = x.dtype
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return weight * h.to(dtype)


def kernel_ops(t, hdim, dev, dt):
    """name -> (forward callable, leaf tensors needing grad, nominal bytes of one forward)."""
    el = t * hdim * torch.finfo(dt).bits // 8
    x = torch.randn(t, hdim, device=dev, dtype=dt, requires_grad=True)
    y = torch.randn(t, hdim, device=dev, dtype=dt, requires_grad=True)
    wln = torch.ones(hdim, device=dev, dtype=dt, requires_grad=True)
    bln = torch.zeros(hdim, device=dev, dtype=dt, requires_grad=True)
    gate = torch.randn(t, 4 * hdim, device=dev, dtype=dt, requires_grad=True)
    up = torch.randn(t, 4 * hdim, device=dev, dtype=dt, requires_grad=True)
    ops = {
        "layernorm": (lambda: F.layer_norm(x, (hdim,), wln, bln), [x, wln, bln], 2 * el),
        "rmsnorm_hf": (lambda: hf_rmsnorm(x, wln), [x, wln], 2 * el),
        "gelu_tanh_4h": (lambda: F.gelu(gate, approximate="tanh"), [gate], 8 * el),
        "swiglu_4h": (lambda: F.silu(gate) * up, [gate, up], 12 * el),
        "dropout": (lambda: F.dropout(x, 0.1, True), [x], 2 * el),
        "residual_add": (lambda: x + y, [x, y], 3 * el),
    }
    if hasattr(F, "rms_norm"):
        ops["rmsnorm_fused"] = (lambda: F.rms_norm(x, (hdim,), wln, 1e-6), [x, wln], 2 * el)
    return ops


def kernels_section(a, clock, env, dt):
    w = Writer(os.path.join(a.out, "kernels.csv"), ["gpu", "op", "dtype", "tokens", "hidden", "status", "fwd_ms",
                                                     "fwdbwd_ms", "bwd_ms", "fwd_bytes", "fwd_cv", "note"], env)
    dev = a.device
    shapes = [(256, 64), (512, 128)] if a.small else [(t, hd) for t in (4096, 16384) for hd in (1024, 2048, 4096, 8192)]
    for (t, hd) in shapes:
        if not clock.before(a.share_kernels):
            break
        try:
            ops = kernel_ops(t, hd, dev, dt)
        except Exception as e:  # noqa: BLE001
            w.row(op="-", dtype=a.dtype_name, tokens=t, hidden=hd, status="error", note=f"{type(e).__name__}: {e}"[:200])
            free()
            continue
        for name, (fn, leaves, nbytes) in ops.items():
            try:
                out = fn()
                g = torch.randn_like(out)

                def fb():
                    torch.autograd.grad(fn(), leaves, g)
                f = timed(fn, dev, a.sample_ms)
                fbt = timed(fb, dev, a.sample_ms)
                w.row(op=name, dtype=a.dtype_name, tokens=t, hidden=hd, status="ok", fwd_ms=fmt(f[0]),
                      fwdbwd_ms=fmt(fbt[0]), bwd_ms=fmt(fbt[0] - f[0]), fwd_bytes=nbytes, fwd_cv=fmt(f[2]))
            except Exception as e:  # noqa: BLE001
                w.row(op=name, dtype=a.dtype_name, tokens=t, hidden=hd, status="error", note=f"{type(e).__name__}: {e}"[:200])
        del ops
        free()
    # the LM head's loss (Hugging Face upcasts the logits to FP32) and the embedding lookup
    for (t, vocab, hd) in ([(256, 1000, 64)] if a.small else [(8192, 50257, 2048), (8192, 151936, 2048),
                                                             (16384, 32000, 4096)]):
        if not clock.before(a.share_kernels):
            break
        try:
            logits = torch.randn(t, vocab, device=dev, dtype=dt, requires_grad=True)
            labels = torch.randint(0, vocab, (t,), device=dev)
            fn = lambda: F.cross_entropy(logits.float(), labels)
            f = timed(fn, dev, a.sample_ms)
            fbt = timed(lambda: torch.autograd.grad(fn(), [logits]), dev, a.sample_ms)
            w.row(op="cross_entropy_fp32", dtype=a.dtype_name, tokens=t, hidden=vocab, status="ok", fwd_ms=fmt(f[0]),
                  fwdbwd_ms=fmt(fbt[0]), bwd_ms=fmt(fbt[0] - f[0]), fwd_bytes=t * vocab * 2, fwd_cv=fmt(f[2]),
                  note="hidden = vocabulary")
            del logits
            table = torch.randn(vocab, hd, device=dev, dtype=dt, requires_grad=True)
            ids = torch.randint(0, vocab, (t,), device=dev)
            fn = lambda: F.embedding(ids, table)
            g = torch.randn(t, hd, device=dev, dtype=dt)
            f = timed(fn, dev, a.sample_ms)
            fbt = timed(lambda: torch.autograd.grad(fn(), [table], g), dev, a.sample_ms)
            w.row(op=f"embedding_v{vocab}", dtype=a.dtype_name, tokens=t, hidden=hd, status="ok", fwd_ms=fmt(f[0]),
                  fwdbwd_ms=fmt(fbt[0]), bwd_ms=fmt(fbt[0] - f[0]), fwd_bytes=2 * t * hd * 2, fwd_cv=fmt(f[2]))
            del table
        except Exception as e:  # noqa: BLE001
            w.row(op="loss/embedding", dtype=a.dtype_name, tokens=t, hidden=vocab, status="error",
                  note=f"{type(e).__name__}: {e}"[:200])
        free()
    print(f"kernels: {w.n} rows at {clock.elapsed():.0f} s", flush=True)


# ---------------------------------------------------------------------------------------------
# optimizer

def optimizer_section(a, clock, env):
    w = Writer(os.path.join(a.out, "optimizer.csv"), ["gpu", "impl", "tensors", "params", "status", "median_ms",
                                                       "min_ms", "cv", "note"], env)
    dev = a.device
    layouts = [(4, 256 * 256)] if a.small else [(8, 4096 * 4096), (64, 4096 * 4096), (2000, 65536), (200, 4096 * 1024)]
    impls = {"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}}
    if dev == "cpu":
        impls.pop("fused")
    for (n, size) in layouts:
        for name, kw in impls.items():
            if not clock.before(a.share_optimizer):
                break
            if name == "forloop" and n * size > 300e6:
                continue  # minutes of launches on a big model would say nothing new
            try:
                ps = [torch.nn.Parameter(torch.randn(size, device=dev)) for _ in range(n)]
                for p in ps:
                    p.grad = torch.randn_like(p)
                opt = torch.optim.AdamW(ps, lr=1e-5, **kw)
                med, mn, cv, r = timed(opt.step, dev, a.sample_ms, samples=3)
                w.row(impl=name, tensors=n, params=n * size, status="ok", median_ms=fmt(med), min_ms=fmt(mn), cv=fmt(cv),
                      note="FP32 params, grads and states")
                del ps, opt
            except Exception as e:  # noqa: BLE001
                w.row(impl=name, tensors=n, params=n * size, status="error", note=f"{type(e).__name__}: {e}"[:200])
            free()
    print(f"optimizer: {w.n} rows at {clock.elapsed():.0f} s", flush=True)


# ---------------------------------------------------------------------------------------------
# Hugging Face training iterations

HF_RUNS = [  # (config, batch, seq, LoRA targets or ""); sizes keep FP32 weights + AdamW + activations < 110 GiB
    ("models/gpt2-large.json", 4, 1024, ""), ("models/gpt2-large.json", 8, 1024, ""),
    ("models/bert-large.json", 8, 512, ""), ("models/bert-large.json", 32, 512, ""),
    ("models/qwen3-0.6b.json", 8, 2048, ""),
    ("models/qwen3-0.6b.json", 8, 2048, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"),
    ("models/smollm3-3b.json", 2, 4096, ""), ("models/smollm3-3b.json", 2, 4096, "q_proj,k_proj,v_proj,o_proj"),
    ("datasets/neusight/model_configs/gpt3_xl.json", 4, 2048, ""),
    ("datasets/neusight/model_configs/opt_13.json", 4, 2048, ""),
    ("datasets/neusight/model_configs/gpt3_27.json", 2, 2048, ""),
    ("models/opt-125m.json", 16, 2048, ""), ("models/pythia-160m.json", 16, 2048, ""),
    ("models/qwen2-0.5b.json", 4, 2048, ""), ("models/qwen2-0.5b.json", 8, 2048, ""),
    ("models/qwen3-0.6b.json", 4, 4096, ""),
    ("models/gemma3-1b.json", 4, 2048, ""), ("models/llama-style.json", 4, 2048, ""),
    ("models/phi3-mini.json", 2, 4096, ""), ("models/minitron-4b.json", 1, 4096, ""),
    ("models/minitron-4b.json", 1, 4096, "q_proj,k_proj,v_proj,o_proj"),
]
PROFILE = {("models/gpt2-large.json", 4, 1024, ""), ("models/qwen3-0.6b.json", 8, 2048, ""),
           ("models/smollm3-3b.json", 2, 4096, "")}


def free():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def build_hf(path, dev, impl):
    import transformers
    with open(os.path.join(ROOT, path)) as f:
        d = json.load(f)
    for key in ("torch_dtype", "dtype", "transformers_version", "_name_or_path"):
        d.pop(key, None)
    cfg = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    cls = getattr(transformers, cfg.architectures[0])
    if hasattr(torch.device(dev), "__enter__"):  # torch >= 2.0: built on the device
        with torch.device(dev):
            model = cls._from_config(cfg, attn_implementation=impl)
    else:
        model = cls._from_config(cfg, attn_implementation=impl).to(dev)
    got = getattr(model.config, "_attn_implementation", "?")
    return cfg, model.float(), got


def profile_step(step, dev, run_name, w):
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    with profile(activities=acts) as prof:
        step()
        sync(dev)
    rows = []
    for e in prof.key_averages():
        if dev == "cpu":  # a dry run: the host's operators
            us = float(getattr(e, "self_cpu_time_total", 0.0))
        elif str(getattr(e, "device_type", "")).endswith("CUDA"):  # a kernel (or memcpy / memset)
            us = float(getattr(e, "device_time_total", 0.0) or getattr(e, "cuda_time_total", 0.0))
        else:
            continue
        if us > 0:
            rows.append((e.key, e.count, us / 1e3))
    rows.sort(key=lambda r: -r[2])
    for name, calls, ms in rows[:120]:
        w.row(run=run_name, kernel=name[:160], calls=calls, device_ms=fmt(ms))
    rest = rows[120:]
    if rest:
        w.row(run=run_name, kernel="(other)", calls=sum(r[1] for r in rest), device_ms=fmt(sum(r[2] for r in rest)))


def hf_section(a, clock, env):
    fields = ["gpu", "model", "config", "batch", "seq", "lora", "status", "attn", "label_ms", "median_ms", "cv", "runs",
              "fwdbwd_ms", "peak_gib", "params", "trainable", "torch", "transformers", "note"]
    w = Writer(os.path.join(a.out, "hf-train.csv"), fields, env)
    pw = Writer(os.path.join(a.out, "profile.csv"), ["gpu", "run", "kernel", "calls", "device_ms"], env)
    try:
        import transformers
    except ImportError as e:
        w.row(model="-", status="skipped", note=f"no transformers: {e}")
        return
    dev = a.device
    runs = HF_RUNS if not a.small else [("models/gpt2.json", 1, 64, ""), ("models/qwen3-0.6b.json", 1, 64, "q_proj")]
    for (path, batch, seq, lora) in runs:
        name = os.path.splitext(os.path.basename(path))[0]
        row = dict(model=name, config=path, batch=batch, seq=seq, lora=lora or "-", torch=torch.__version__,
                   transformers=transformers.__version__)
        if not clock.before(a.share_hf):
            w.row(**{**row, "status": "skipped", "note": "time share"})
            continue
        model = opt = None
        try:
            t_build = time.time()
            cfg, model, got = build_hf(path, dev, "sdpa")
            row["attn"] = got
            if lora:
                from peft import LoraConfig, get_peft_model
                model = model.to(torch.bfloat16)
                model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                                         target_modules=lora.split(","), task_type="CAUSAL_LM"))
                for p in model.parameters():
                    if p.requires_grad:
                        p.data = p.data.float()
            model.train()
            params = [p for p in model.parameters() if p.requires_grad]
            row["params"] = sum(p.numel() for p in model.parameters())
            row["trainable"] = sum(p.numel() for p in params)
            opt = torch.optim.AdamW(params, lr=1e-5, **({"fused": True} if dev == "cuda" else {}))
            ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=dev)
            kw = {"input_ids": ids, "labels": ids}
            dt = torch.bfloat16

            def fwdbwd():
                with torch.autocast(device_type=dev, dtype=dt):
                    out = model(**kw)
                out.loss.backward()

            def step():
                fwdbwd()
                opt.step()

            def clear():
                opt.zero_grad(set_to_none=True)
            if dev == "cuda":
                torch.cuda.reset_peak_memory_stats()
            build_s = time.time() - t_build
            for _ in range(3):
                clear()
                step()
            sync(dev)
            ts = []
            t_loop = time.time()
            while len(ts) < a.hf_runs and (len(ts) < 5 or time.time() - t_loop < a.hf_run_s):
                clear()
                if dev == "cuda":
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    step()
                    e1.record()
                    e1.synchronize()
                    ts.append(e0.elapsed_time(e1))
                else:
                    t = time.perf_counter()
                    step()
                    ts.append((time.perf_counter() - t) * 1e3)
            fb = []
            for _ in range(3):
                clear()
                sync(dev)
                t = time.perf_counter()
                fwdbwd()
                sync(dev)
                fb.append((time.perf_counter() - t) * 1e3)
            fastest = sorted(ts)[:5]
            row.update(status="ok", label_ms=fmt(statistics.mean(fastest)), median_ms=fmt(statistics.median(ts)),
                       cv=fmt(statistics.pstdev(ts) / statistics.mean(ts)), runs=len(ts),
                       fwdbwd_ms=fmt(statistics.median(fb)),
                       peak_gib=fmt(torch.cuda.max_memory_allocated() / 2**30) if dev == "cuda" else "",
                       note=f"build {build_s:.1f} s")
            w.row(**row)
            print(f"hf {name} {batch}x{seq} lora={lora or '-'}: {row['label_ms']} ms at {clock.elapsed():.0f} s", flush=True)
            if (path, batch, seq, lora) in PROFILE or a.small:
                if clock.before(a.share_hf):
                    clear()
                    profile_step(step, dev, f"{name}-{batch}x{seq}", pw)
        except Exception as e:  # noqa: BLE001 -- out of memory, a type this transformers lacks: a row
            oom = "OutOfMemory" in type(e).__name__
            w.row(**{**row, "status": "oom" if oom else "error", "note": f"{type(e).__name__}: {e}"[:300]})
            print(f"hf {name} {batch}x{seq}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        del model, opt
        free()
    print(f"hf: {w.n} rows at {clock.elapsed():.0f} s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--small", action="store_true", help="small shapes and FP32 (a CPU dry run)")
    ap.add_argument("--deadline-s", type=float, default=500)
    ap.add_argument("--sample-ms", type=float, default=2.0)
    ap.add_argument("--hf-runs", type=int, default=12, help="timed iterations at most per run")
    ap.add_argument("--hf-run-s", type=float, default=5.0, help="fewer iterations (>= 5) past this many seconds")
    ap.add_argument("--sections", default="gemm,attention,kernels,optimizer,hf")
    ap.add_argument("--unfused-cast", action="store_true")
    # cumulative shares of the deadline at which each section stops starting work
    ap.add_argument("--share-gemm", type=float, default=0.12)
    ap.add_argument("--share-attention", type=float, default=0.20)
    ap.add_argument("--share-kernels", type=float, default=0.25)
    ap.add_argument("--share-optimizer", type=float, default=0.30)
    ap.add_argument("--share-hf", type=float, default=0.96)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dt = torch.float32 if a.small else torch.bfloat16
    a.dtype_name = "fp32" if a.small else "bf16"
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        gpu = torch.cuda.get_device_name(0)
    else:
        gpu = "cpu"
    env = {"gpu": gpu}
    with open(os.path.join(a.out, "env-py.txt"), "w") as f:
        vers = {"torch": torch.__version__, "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version() if a.device == "cuda" else None}
        for mod in ("transformers", "peft"):
            try:
                vers[mod] = getattr(__import__(mod), "__version__", "?")
            except Exception:  # noqa: BLE001 -- a version is a note
                vers[mod] = None
        f.write(json.dumps(vers) + "\n")
    clock = Clock(a.deadline_s)
    torch.manual_seed(0)
    sections = a.sections.split(",")
    if "gemm" in sections:
        gemm_section(a, clock, env, dt)
    if "attention" in sections:
        attention_section(a, clock, env, dt)
    if "kernels" in sections:
        kernels_section(a, clock, env, dt)
    if "optimizer" in sections:
        optimizer_section(a, clock, env)
    if "hf" in sections:
        hf_section(a, clock, env)
    print(f"total {clock.elapsed():.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
