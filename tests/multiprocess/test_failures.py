"""Failures surface once, fast and true (docs/reliability.md): an uncaught exception or an early exit on one
worker, a frozen scheduler, a failed init, a killed launcher. Jobs run in cluster mode (ManualJob), so that
only bps_tf itself, not bpslaunch --local's supervision, tells the other processes."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from testing.jobs import BPSLAUNCH, WORKERS_DIR, ManualJob, clean_env, free_port

LONG_TIMEOUT = 120  # far above what any failure below may take to surface


def failure(out, rank):
    match = re.search(rf"rank {rank}: failed after ([0-9.]+) s: (\w+): (.*)", out)
    assert match, out[-3000:]
    return float(match.group(1)), match.group(3)


@pytest.mark.timeout(120)
def test_an_uncaught_exception_on_one_worker_ends_the_job_within_seconds_naming_it():
    with ManualJob(3, 1, "lifecycle.py", "raise", BYTEPS_TIMEOUT=LONG_TIMEOUT) as job:
        code, out = job.wait("worker1", timeout=60)
        assert code != 0 and "ValueError: boom in the training loop of worker 1" in out, out[-3000:]
        for rank in (0, 2):
            code, out = job.wait(f"worker{rank}", timeout=30)
            assert code == 7, out[-3000:]
            seconds, message = failure(out, rank)
            assert seconds < 10, out[-3000:]
            assert "worker 1" in message and "ValueError: boom in the training loop of worker 1" in message, message
        for name in ("scheduler", "server0"):
            code, out = job.wait(name, timeout=30)
            assert code != 0 and "ValueError: boom" in out, out[-3000:]


@pytest.mark.timeout(120)
def test_a_worker_that_exits_early_fails_the_others_at_once():
    with ManualJob(2, 1, "lifecycle.py", "exit", BYTEPS_TIMEOUT=LONG_TIMEOUT) as job:
        code, out = job.wait("worker1", timeout=60)
        assert code == 1, out[-3000:]
        code, out = job.wait("worker0", timeout=30)
        assert code == 7, out[-3000:]
        seconds, message = failure(out, 0)
        assert seconds < 10 and "worker(s) 1 finished" in message, message


@pytest.mark.timeout(120)
def test_a_process_runs_a_second_generation_after_shutdown():
    with ManualJob(2, 2, "lifecycle.py", "generations", BYTEPS_TIMEOUT=LONG_TIMEOUT) as job:
        for rank in range(2):
            code, out = job.wait(f"worker{rank}", timeout=60)
            assert code == 0, out[-3000:]
            for generation in range(2):
                match = re.search(rf"rank {rank}: generation {generation} exact in ([0-9.]+) s", out)
                assert match and float(match.group(1)) < 20, out[-3000:]
        for name in ("scheduler", "server0", "server1"):
            code, out = job.wait(name, timeout=30)
            assert code == 0, out[-3000:]


@pytest.mark.timeout(120)
def test_a_frozen_scheduler_ends_servers_and_workers_within_the_timeout():
    with ManualJob(2, 1, "loop_until_failure.py", BYTEPS_TIMEOUT=4) as job:
        time.sleep(3)  # the workers are looping over push_pull
        os.killpg(job.processes["scheduler"].pid, signal.SIGSTOP)
        started = time.monotonic()
        code, out = job.wait("server0", timeout=30)
        assert code != 0 and "no sign of life" in out, out[-3000:]
        assert time.monotonic() - started < 15
        for rank in range(2):
            code, out = job.wait(f"worker{rank}", timeout=30)
            assert code == 7 and "failed after" in out, out[-3000:]
        os.killpg(job.processes["scheduler"].pid, signal.SIGCONT)


def run_python(code, timeout=60, **env):
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], env=clean_env(**env), capture_output=True, text=True,
                            timeout=timeout)
    return result, time.monotonic() - started


JOB = dict(DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1", DMLC_NUM_WORKER=1, DMLC_NUM_SERVER=1,
           BYTEPS_JOB_SECRET="the secret of a job that is not there")
INIT = ("import bps_tf.numpy as bps\ntry:\n    bps.init()\nexcept Exception as e:\n"
        "    print('caught', type(e).__name__, e)")


@pytest.mark.timeout(60)
def test_init_without_a_scheduler_fails_once_within_the_timeout():
    result, seconds = run_python(INIT, DMLC_PS_ROOT_PORT=free_port(), BYTEPS_TIMEOUT=3, **{
        k: v for k, v in JOB.items()})
    assert "caught" in result.stdout and "cannot reach the scheduler" in result.stdout, result.stdout + result.stderr
    assert seconds < 3 + 5, f"{seconds:.1f} s: a second timeout was waited somewhere"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("variable, value, message", [
    ("BYTEPS_TIMEOUT", "inf", "at most 604800"),
    ("BYTEPS_TIMEOUT", "1e10", "at most 604800"),
    ("DMLC_PS_ROOT_URI", "no-such-host.invalid", "does not resolve"),
    ("BYTEPS_JOB_SECRET", "short", "at least 16"),
])
def test_configuration_errors_are_reported_at_once(variable, value, message):
    env = dict(JOB, DMLC_PS_ROOT_PORT=free_port(), BYTEPS_TIMEOUT=300)
    env[variable] = value
    result, seconds = run_python(INIT, **env)
    assert "caught ValueError" in result.stdout and message in result.stdout, result.stdout + result.stderr
    assert seconds < 15


@pytest.mark.timeout(60)
def test_killing_bpslaunch_kills_every_process_it_started():
    launcher = subprocess.Popen([BPSLAUNCH, "--local", "--workers", "2", "--servers", "1", "--", sys.executable,
                                 "-c", "import time; time.sleep(300)"], env=clean_env(), start_new_session=False)
    try:
        deadline = time.monotonic() + 20
        children = []
        while time.monotonic() < deadline and len(children) < 4:
            children = _children(launcher.pid)
            time.sleep(0.1)
        assert len(children) >= 4, children  # scheduler, server, two workers
        launcher.kill()
        launcher.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(pid) for pid in children):
            time.sleep(0.1)
        assert not [pid for pid in children if _alive(pid)]
    finally:
        launcher.kill()


def _children(pid):
    found = []
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                fields = open(f"/proc/{stat}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(stat))
    return found


def _alive(pid):
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
