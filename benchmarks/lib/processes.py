"""Starting a benchmark's processes: the checkout's root, `bpslaunch`, the environment they get, settings
given as NAME=VALUE, and free ports for TensorFlow's gRPC servers on loopback."""

import os
import socket
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


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


def free_ports(count, host="127.0.0.1"):
    """`count` distinct ports nobody listens on now (held open together so they differ)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind((host, 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()
