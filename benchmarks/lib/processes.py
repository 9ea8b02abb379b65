"""Paths and environment shared by the benchmark drivers."""

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def bpslaunch():
    return str(Path(sys.executable).parent / "bpslaunch")


def benchmark_env(extra=()):
    """This environment without job variables (a job's own DMLC_*/BYTEPS_* must not leak in), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_", "TF_CONFIG"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"  # TF's start-up chatter would bury the results
    env.update({k: str(v) for k, v in dict(extra).items()})
    return env


def parse_env_items(items):
    """["NAME=VALUE", ...] -> dict."""
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"a setting is NAME=VALUE, not {item!r}")
        pairs[name] = value
    return pairs
