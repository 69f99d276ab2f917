"""CUDA-event timing shared by the GPU benchmark scripts (hf_e2e_bench.py,
neusight_ops_bench.py): warm-up runs, then each run timed alone between two
CUDA events with a synchronize after it, as NeuSight timed its labels. On
device "cpu" (a dry run of a script where no GPU is) the wall clock times it."""
import time

import torch


def time_runs(run, runs, warmup, before_each=None, device="cuda"):
    """Milliseconds of each of `runs` calls of run(), after `warmup` untimed calls.
    before_each(), if given, runs untimed before every timed call."""
    for _ in range(warmup):
        run()
    if device == "cpu":
        times = []
        for _ in range(runs):
            if before_each is not None:
                before_each()
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) * 1e3)
        return times
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        if before_each is not None:
            before_each()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times
