"""Timing of repeated calls: the median is reported, since these machines are noisy (min and max kept too)."""

import statistics
import time


def time_calls(call, repeats, warmup=1):
    """Seconds taken by each of `repeats` calls of `call()`, after `warmup` untimed ones."""
    for _ in range(warmup):
        call()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


def summary(seconds):
    return {"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
            "samples": len(seconds)}


def repeats_for(nbytes, budget_bytes=512 << 20, most=20, least=3):
    """Fewer repeats for large tensors, so that each size moves about `budget_bytes` in all."""
    return max(least, min(most, budget_bytes // max(nbytes, 1)))
