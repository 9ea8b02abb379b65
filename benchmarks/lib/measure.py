"""How the benchmarks measure: repeated calls timed (the median is reported, since these machines are noisy;
min and max kept too), and the link's bounds they compare against (tc rate strings such as 1gbit, 500mbit,
100mbps as bytes per second; the bounds M/B and 2(N-1)/N*M/B); and Keras fit timed in rounds (RoundTimer)."""

import re
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


# tc's units, in bits or bytes per second.
_BITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_BYTES = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9}


def rate_bytes_per_s(rate):
    match = re.fullmatch(r"([0-9.]+)([a-z]+)", rate.strip().lower())
    if not match or match.group(2) not in {**_BITS, **_BYTES}:
        raise ValueError(f"rate {rate!r}: use tc's units, e.g. 1gbit, 500mbit, 100mbps")
    value, unit = float(match.group(1)), match.group(2)
    return value * _BITS[unit] / 8 if unit in _BITS else value * _BYTES[unit]


def bounds(rate, workers, servers, colocate):
    """Lower bounds on one push_pull or all-reduce of M bytes, as factors of M/B.

    push_pull with servers on their own hosts: each worker's link carries M out and M in -> M/B.
    Servers co-located with workers (one per worker host): a host's link also carries its server's
    traffic, (N-1)/N*M out for the other workers' results plus (N-1)/N*M of its worker's push -> 2(N-1)/N."""
    if colocate and servers != workers:
        raise ValueError("colocate places one server on each worker host: use as many servers as workers")
    ring = 2 * (workers - 1) / workers
    return {"rate": rate, "link_bytes_s": rate_bytes_per_s(rate), "ring_factor": ring,
            "push_pull_factor": ring if colocate else 1.0}


class RoundTimer:
    """Seconds and steps of each epoch of a Keras fit from its first step's end to its last's (the first step
    of an epoch also waits for the epoch to begin); each step's loss is read back, so its GPU work has
    finished. `keras`: the Keras module the model is built with."""

    def __init__(self, keras):
        timer = self
        self.rounds = []

        class Callback(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                float(logs["loss"])
                now = time.perf_counter()
                if batch == 0:
                    timer.started = now
                timer.last, timer.steps = now, batch

            def on_epoch_end(self, epoch, logs=None):
                timer.rounds.append((timer.last - timer.started, timer.steps))

        self.callback = Callback()
