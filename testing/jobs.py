"""Running real multi-process jobs from tests, reliability cases and benchmarks: the environment of the
processes they start, free ports, `bpslaunch --local`, or each role started by hand (cluster mode) when a
test needs to kill one of them. Every process is killed when the test ends, pass or fail."""

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKERS_DIR = REPO_ROOT / "tests" / "workers"
BPSLAUNCH = str(Path(sys.executable).parent / "bpslaunch")

# What tells bps_tf and bpslaunch which job a process belongs to: ps-lite's and BytePS's variables, and the
# cluster managers' descriptions bpslaunch reads its roles from (TF_CONFIG, also read by tf.distribute, and
# SLURM's). A process started here must not inherit a job from the shell that runs the tests.
JOB_VARIABLE_PREFIXES = ("DMLC_", "BYTEPS_", "TF_CONFIG", "SLURM_")
# Settings that describe the machine rather than a job, which the shell may set for every test's processes:
# the suite runs as well with 1 TCP I/O thread as with 4.
PASSED_THROUGH = ("BYTEPS_TCP_IO_THREADS",)


def clean_env(**extra):
    """This process's environment without a job's variables, with this checkout on PYTHONPATH (bps_tf, the
    examples and this module) and unbuffered Python output, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(JOB_VARIABLE_PREFIXES) or k in PASSED_THROUGH}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def free_ports(count, host="127.0.0.1"):
    """`count` distinct TCP ports nobody listens on now (held open together so that they differ)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind((host, 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def free_port(host="127.0.0.1"):
    """A TCP port nobody listens on now."""
    return free_ports(1, host)[0]


def run_local(script, workers, servers, *args, timeout=240, python=sys.executable, **env):
    """Runs tests/workers/<script> as a `bpslaunch --local` job, its workers with `python`; returns the
    CompletedProcess."""
    command = [BPSLAUNCH, "--local", "--workers", str(workers), "--servers", str(servers),
               "--timeout", str(timeout), "--", str(python), str(WORKERS_DIR / script), *map(str, args)]
    return subprocess.run(command, env=clean_env(**env), capture_output=True, text=True, timeout=timeout + 60)


def assert_job_ok(result, workers, marker):
    """The job exited 0 and every worker printed `rank N: <marker>`."""
    tail = f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    assert result.returncode == 0, f"exit {result.returncode}\n{tail}"
    for w in range(workers):
        assert f"[worker {w}] rank {w}: {marker}" in result.stdout, tail


class ManualJob:
    """Scheduler and servers started through `bpslaunch` in cluster mode (the role runs inside that process);
    workers started directly, so that killing one kills the training process itself. Each process's output
    goes to a file (never a pipe that could fill up and block it). `before_the_others(job)`, if given, runs once
    the scheduler was started, before any server or worker is."""

    def __init__(self, workers, servers, script, *args, before_the_others=None, **env):
        self.workers, self.servers = workers, servers
        self.base = dict(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=free_port(),
                         DMLC_NUM_WORKER=workers, DMLC_NUM_SERVER=servers, DMLC_NODE_HOST="127.0.0.1",
                         BYTEPS_JOB_SECRET=secrets.token_hex(16))
        self.base.update(env)
        self.processes = {}
        self._outputs = {}
        self._directory = tempfile.TemporaryDirectory(prefix="bps_tf_job_")
        self._start("scheduler", [])
        if before_the_others is not None:
            try:
                before_the_others(self)
            except BaseException:
                self.close()
                raise
        for s in range(servers):
            self._start(f"server{s}", [])
        for w in range(workers):
            self._start(f"worker{w}", [sys.executable, str(WORKERS_DIR / script), *map(str, args)],
                        DMLC_WORKER_ID=w)

    def _start(self, name, command, **extra):
        role = name.rstrip("0123456789")
        env = clean_env(DMLC_ROLE=role, **self.base, **extra)
        argv = command if role == "worker" else [BPSLAUNCH]
        output = open(Path(self._directory.name) / f"{name}.log", "w")
        self._outputs[name] = output
        self.processes[name] = subprocess.Popen(argv, env=env, stdout=output, stderr=subprocess.STDOUT, text=True,
                                                start_new_session=True)

    def output(self, name):
        return (Path(self._directory.name) / f"{name}.log").read_text(errors="replace")

    def kill(self, name):
        os.killpg(self.processes[name].pid, signal.SIGKILL)

    def outputs(self):
        """Every process's output (its last 3000 characters), for assertion messages."""
        return "\n".join(f"--- {n}:\n{self.output(n)[-3000:]}" for n in self.processes)

    def wait(self, name, timeout):
        """Exit code and output of one process; an AssertionError with every process's output if it is still
        running after `timeout` seconds."""
        process = self.processes[name]
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name} still runs after {timeout} s\n{self.outputs()}") from None
        return process.returncode, self.output(name)

    def close(self):
        kill_process_groups(self.processes.values())
        for output in self._outputs.values():
            output.close()
        self._directory.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def kill_process_groups(processes):
    """SIGKILL to the process group of each of `processes` (started with start_new_session) still running,
    then reaps them all."""
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait()


def communicate_all(processes, timeout):
    """(returncode, stdout, stderr) of each of `processes` (started with start_new_session and text pipes), each
    waited for at most `timeout` s; any still running then is killed with its group. communicate() drains both
    pipes while it waits, so a chatty process cannot block on a full pipe."""
    try:
        return [(process.returncode, out, err) for process in processes
                for out, err in [process.communicate(timeout=timeout)]]
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()


def wait_for_line(path, text, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"'{text}' did not appear in {path} within {timeout} s")
