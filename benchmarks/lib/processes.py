"""Starting a benchmark's processes: the environment they get (testing.jobs's, which also gives the checkout's
root, `bpslaunch` and free ports) and settings given as NAME=VALUE."""

import os

from bps_tf.launcher import allocator
from testing.jobs import clean_env


def benchmark_env(extra=()):
    """testing.jobs.clean_env (no job's variables leak in) with TensorFlow's start-up chatter off (it would bury
    the results), plus `extra`."""
    return clean_env(**{"TF_CPP_MIN_LOG_LEVEL": "2", **dict(extra)})


def with_the_rings_malloc(settings):
    """`settings` with glibc's malloc unless they name one (BYTEPS_ALLOCATOR). benchmarks.workers.push_pull
    times TF's ring in the same processes as bps_tf, which bpslaunch starts with jemalloc preloaded; TF's ring
    runs slower with it (16 MB on loopback: 48-51 ms against 23-26), which would flatter bps_tf's ratio."""
    return {"BYTEPS_ALLOCATOR": "system", **settings}


def preloaded_malloc(environ):
    """The malloc a process started with `environ` gets: what LD_PRELOAD names (less bps_tf's allocation
    router, which goes with jemalloc), or "glibc"."""
    preloads = environ.get("LD_PRELOAD", "").split()
    return " ".join(p for p in preloads if os.path.basename(p) != allocator.ROUTER) or "glibc"


def job_malloc(settings):
    """The malloc bpslaunch gives the processes of a job started with `settings`."""
    return preloaded_malloc(allocator.apply(benchmark_env(settings)))


def parse_env_items(items):
    """["NAME=VALUE", ...] -> dict."""
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"a setting is NAME=VALUE, not {item!r}")
        pairs[name] = value
    return pairs

