"""A benchmark's result file: the JSON the plots and docs/performance.md are made from, with a description of
the machine it was measured on (`describe_machine`, stored in every result)."""

import json
import os
import platform
import subprocess
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[2]


def save_result(output, result):
    """Writes `result` to `output` as indented JSON; does nothing when no output file was asked for."""
    if not output:
        return
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(result, indent=1) + "\n")


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib():
    with open("/proc/meminfo") as info:
        kib = int(info.readline().split()[1])
    return round(kib / (1 << 20), 1)


def _ucx_version():
    try:
        out = subprocess.run(["ucx_info", "-v"], capture_output=True, text=True, timeout=10).stdout
        return out.splitlines()[0].strip("# ").strip() if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _tensorflow_version():
    """The installed TensorFlow's version, read from package metadata (without importing TensorFlow): the
    distribution is tensorflow-cpu in the project's environment, tensorflow elsewhere."""
    import importlib.metadata as metadata

    for distribution in ("tensorflow-cpu", "tensorflow"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def describe_machine():
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "tensorflow": _tensorflow_version(),
        "ucx": _ucx_version(),
    }


def product_version():
    """The commit measured, and whether the product's code differed from it (bps_tf/, cc/)."""
    def git(*argv):
        done = subprocess.run(["git", *argv], cwd=_CHECKOUT, capture_output=True, text=True, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else None

    changed = git("status", "--porcelain", "--", "bps_tf", "cc")
    return {"commit": git("rev-parse", "HEAD"), "uncommitted_changes": None if changed is None else bool(changed)}
