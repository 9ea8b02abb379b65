"""Running one case: a job, a process or a stranger's connection, timed, and its outcome in one line."""

import dataclasses
import os
import re
import secrets
import subprocess
import sys
import time
from typing import Callable

from testing.jobs import BPSLAUNCH, clean_env, free_port


@dataclasses.dataclass
class Outcome:
    held: bool          # bps_tf behaved as the case expects
    observed: str       # what happened, in one line
    seconds: float = None  # time until the failure surfaced (or the run took), where it matters


@dataclasses.dataclass
class Case:
    category: str  # bad input, environment, fault, attack
    name: str      # what was tried
    expected: str  # what must happen
    run: Callable[[], Outcome]


@dataclasses.dataclass
class Run:
    code: int
    out: str
    seconds: float


def python(code, env, timeout=60):
    """A Python snippet in a process of its own, with `env` (plus PYTHONPATH to this checkout)."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], env=clean_env(**env), capture_output=True, text=True,
                            timeout=timeout, errors="replace")
    return Run(result.returncode, result.stdout + result.stderr, time.monotonic() - started)


def local_job(worker_code, workers=2, servers=1, timeout=60, **env):
    """`bpslaunch --local` with `worker_code` as every worker's program."""
    started = time.monotonic()
    command = [BPSLAUNCH, "--local", "--workers", str(workers), "--servers", str(servers), "--timeout",
               str(timeout), "--", sys.executable, "-c", worker_code]
    result = subprocess.run(command, env=clean_env(**env), capture_output=True, text=True, timeout=timeout + 30,
                            errors="replace")
    return Run(result.returncode, result.stdout + result.stderr, time.monotonic() - started)


def cluster_env(**extra):
    """DMLC_* of a one-worker job on loopback whose scheduler is not there (for single-process cases)."""
    env = dict(DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=free_port(), DMLC_NUM_WORKER=1,
               DMLC_NUM_SERVER=1, BYTEPS_JOB_SECRET=secrets.token_hex(16), BYTEPS_TIMEOUT=5)
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def first_line_with(text, *needles):
    """The first line of `text` holding every needle, cut to 160 characters; '' if none."""
    for line in text.splitlines():
        if all(n in line for n in needles):
            line = re.sub(r"^\[[^\]]+\] ", "", line.strip())
            return line if len(line) <= 160 else line[:157] + "..."
    return ""


def error_line(text):
    """The line that names the error: bpslaunch's report, or an exception's message."""
    for needle in ("bpslaunch: ", "Error: ", "caught ", "failed after"):
        line = first_line_with(text, needle)
        if line:
            return line
    return text.strip().splitlines()[-1][:160] if text.strip() else "(no output)"


def expect_error(run, *needles, within=None):
    """Held when the run failed (or reported a caught error) with a message holding every needle."""
    line = error_line(run.out)
    found = all(n in run.out for n in needles)
    fast = within is None or run.seconds <= within
    return Outcome(found and fast, line, run.seconds)


def expect_success(run, *needles):
    found = run.code == 0 and all(n in run.out for n in needles)
    line = first_line_with(run.out, needles[0]) if needles else ""
    return Outcome(found, line or error_line(run.out), run.seconds)


def alive(process):
    return process.poll() is None


def environ_without(*names):
    return {k: v for k, v in os.environ.items() if k not in names}
