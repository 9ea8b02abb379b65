"""A bad environment: variables, secrets, addresses, ports, and misconfigured processes of a job."""

import os
import socket
import tempfile

from testing.jobs import BPSLAUNCH, ManualJob, clean_env
from tests.reliability.harness import (Case, Outcome, Run, cluster_env, expect_error, expect_success, first_line_with,
                                       python)

INIT = ("import bps_tf.numpy as bps\ntry:\n    bps.init()\n    print('joined')\nexcept Exception as e:\n"
        "    print('caught', type(e).__name__, e)\n")


def init_case(name, env_changes, *needles, within=3, expected="an error at once, naming the variable"):
    return Case("environment", name, expected,
                lambda: expect_error(python(INIT, cluster_env(**env_changes)), "caught", *needles, within=within))


def bpslaunch_case(name, env, *needles):
    def run():
        import subprocess, time
        started = time.monotonic()
        result = subprocess.run([BPSLAUNCH, "python", "-c", "pass"], env=dict(clean_env(), **env), capture_output=True,
                                text=True, timeout=60)
        return expect_error(Run(result.returncode, result.stdout + result.stderr, time.monotonic() - started),
                            *needles, within=5)
    return Case("environment", name, "bpslaunch stops at once, naming the problem", run)


def _port_in_use():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def scheduler_on_a_busy_port():
    with _port_in_use() as sock:
        env = cluster_env(DMLC_ROLE="scheduler", DMLC_PS_ROOT_PORT=sock.getsockname()[1])
        return expect_error(python("import bps_tf._native as n\ntry:\n    n.load_core().run_role()\nexcept Exception "
                                   "as e:\n    print('caught', e)", env), "caught", "cannot listen", within=5)


def secret_file_case():
    with tempfile.NamedTemporaryFile("w", suffix=".secret") as f:
        f.write("a secret kept in a file, long enough\n")
        f.flush()
        env = cluster_env(BYTEPS_JOB_SECRET=None, BYTEPS_JOB_SECRET_FILE=f.name, BYTEPS_TIMEOUT=2)
        run = python(INIT, env)
    # No scheduler: the secret was accepted when the error is about reaching the scheduler.
    return expect_error(run, "caught", "cannot reach the scheduler", within=10)


def misconfigured_worker(change, *needles):
    """A two-worker job whose worker 1 has `change` in its environment: worker 1 stops at once naming the
    problem; worker 0 fails when the job's start times out (BYTEPS_TIMEOUT=4), naming the rejection."""
    def run():
        code = ("import os\nif os.environ['DMLC_WORKER_ID'] == '1':\n" +
                "".join(f"    os.environ[{k!r}] = {v!r}\n" for k, v in change.items()) + INIT)
        script = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
        script.write(code)
        script.close()
        try:
            with ManualJob(2, 1, script.name, BYTEPS_TIMEOUT=4) as job:
                _, out1 = job.wait("worker1", timeout=30)
                _, out0 = job.wait("worker0", timeout=30)
        finally:
            os.unlink(script.name)
        # Whichever registers second is turned away: usually worker 1, the misconfigured one.
        turned_away, other = (out1, out0) if all(n in out1 for n in needles) else (out0, out1)
        held = all(n in turned_away for n in needles) and "caught" in other
        return Outcome(held, first_line_with(turned_away, "caught") + " | the other: " +
                       first_line_with(other, "caught")[:80])
    return Case("environment", f"one worker of a job started with {', '.join(f'{k}={v}' for k, v in change.items())}",
                "one worker is turned away at once with the reason; the job's start fails within BYTEPS_TIMEOUT", run)


def localhost_as_root():
    with ManualJob(2, 1, "steady_sums.py", "/nonexistent/stop", DMLC_PS_ROOT_URI="localhost", BYTEPS_TIMEOUT=20) as job:
        import time
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "joined" not in job.output("worker1"):
            time.sleep(0.1)
        joined = "joined" in job.output("worker0") and "joined" in job.output("worker1")
    return Outcome(joined, "both workers joined" if joined else job.output("worker0")[-160:])


CASES = [
    bpslaunch_case("DMLC_ROLE not set (cluster mode)", {}, "DMLC_ROLE is not set"),
    bpslaunch_case("DMLC_ROLE=chief", {"DMLC_ROLE": "chief"}, "must be scheduler, server or worker"),
    init_case("DMLC_PS_ROOT_URI not set", {"DMLC_PS_ROOT_URI": None}, "DMLC_PS_ROOT_URI is not set"),
    init_case("DMLC_PS_ROOT_URI=no-such-host.invalid", {"DMLC_PS_ROOT_URI": "no-such-host.invalid"},
              "does not resolve"),
    init_case("DMLC_PS_ROOT_PORT=70000", {"DMLC_PS_ROOT_PORT": "70000"}, "DMLC_PS_ROOT_PORT"),
    init_case("DMLC_NUM_WORKER=0", {"DMLC_NUM_WORKER": "0"}, "DMLC_NUM_WORKER"),
    init_case("DMLC_WORKER_ID=5 in a job of 2", {"DMLC_NUM_WORKER": "2", "DMLC_WORKER_ID": "5"}, "DMLC_WORKER_ID"),
    init_case("BYTEPS_TIMEOUT=inf", {"BYTEPS_TIMEOUT": "inf"}, "at most 604800"),
    init_case("BYTEPS_TIMEOUT=1e10", {"BYTEPS_TIMEOUT": "1e10"}, "at most 604800"),
    init_case("BYTEPS_TIMEOUT=-1", {"BYTEPS_TIMEOUT": "-1"}, "BYTEPS_TIMEOUT"),
    init_case("BYTEPS_TIMEOUT=ten", {"BYTEPS_TIMEOUT": "ten"}, "BYTEPS_TIMEOUT"),
    init_case("no job secret", {"BYTEPS_JOB_SECRET": None}, "BYTEPS_JOB_SECRET"),
    init_case("a job secret of 5 bytes", {"BYTEPS_JOB_SECRET": "short"}, "at least 16"),
    init_case("BYTEPS_JOB_SECRET_FILE names no file", {"BYTEPS_JOB_SECRET": None,
                                                        "BYTEPS_JOB_SECRET_FILE": "/nonexistent/secret"},
              "cannot be read"),
    init_case("both BYTEPS_JOB_SECRET and BYTEPS_JOB_SECRET_FILE", {"BYTEPS_JOB_SECRET_FILE": "/etc/hostname"},
              "set one of them"),
    Case("environment", "the job secret in a file", "accepted", secret_file_case),
    init_case("BYTEPS_PARTITION_BYTES=3", {"BYTEPS_PARTITION_BYTES": "3"}, "BYTEPS_PARTITION_BYTES"),
    init_case("BYTEPS_TRANSPORT=pigeon", {"BYTEPS_TRANSPORT": "pigeon"}, "tcp or ucx"),
    init_case("BYTEPS_LOCAL_RANK=2 with BYTEPS_LOCAL_SIZE=2", {"BYTEPS_LOCAL_RANK": "2", "BYTEPS_LOCAL_SIZE": "2"},
              "BYTEPS_LOCAL_RANK"),
    init_case("DMLC_NODE_HOST is not an address of this machine", {"DMLC_NODE_HOST": "192.0.2.1"}, "cannot listen"),
    Case("environment", "a scheduler on a port already in use", "an error at once", scheduler_on_a_busy_port),
    init_case("no scheduler at DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT (BYTEPS_TIMEOUT=5)", {}, "cannot reach the scheduler",
              within=5 + 3, expected="an error once, within BYTEPS_TIMEOUT (no second wait at exit)"),
    Case("environment", "DMLC_PS_ROOT_URI=localhost", "resolved: the job runs", localhost_as_root),
    misconfigured_worker({"DMLC_NUM_WORKER": "3"}, "DMLC_NUM_WORKER=3"),
    misconfigured_worker({"DMLC_WORKER_ID": "0"}, "two workers registered"),
    misconfigured_worker({"BYTEPS_LOCAL_SIZE": "2", "BYTEPS_LOCAL_RANK": "1", "DMLC_WORKER_ID": "0"},
                         "BYTEPS_LOCAL_SIZE=", "but another worker has"),
    misconfigured_worker({"BYTEPS_JOB_SECRET": "another job's secret, long"}, "job secret"),
    misconfigured_worker({"DMLC_NUM_SERVER": "2"}, "DMLC_NUM_SERVER=2"),
]
