"""--mps (BYTEPS_MPS=1): NVIDIA's Multi-Process Service for the worker processes that share a machine's GPUs.

Several processes on one GPU take turns on it without MPS (time slices of the whole GPU): while one process's
kernels run, another's copies to and from the host wait. Under MPS their kernels and copies run at once. With
2 workers sharing one GPU through a server on the host, the encoder of docs/gpu.md trained 1.06x (mixed
precision) and 1.18x (float32) faster under MPS. It is meant for processes that share a GPU.

bpslaunch starts a control daemon of the job's own (`nvidia-cuda-mps-control -f`, a child that dies with
bpslaunch, its pipe folder in a private temporary folder), gives every process it starts
CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY, and quits the daemon when the job ends. CUDA connects a
process to the daemon when it first initializes; a process that cannot connect runs without MPS, which is
why bpslaunch waits until the daemon accepts a connection before it starts any process. A
CUDA_MPS_PIPE_DIRECTORY set already names a daemon that someone else runs: the job uses it and bpslaunch
starts none. The daemon logs, and bpslaunch puts what it prints, into CUDA_MPS_LOG_DIRECTORY where that is set
(and kept), else into the private folder, removed with it.

This module imports nothing heavy: the launcher uses it before any process starts.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

from bps_tf.launcher.child_processes import KILL_GRACE_S, SIGNAL_EXIT_BASE, start_in_own_group, stop_process_groups
from bps_tf.launcher.stop_signals import StopSignals

VARIABLE = "BYTEPS_MPS"
CONTROL = "nvidia-cuda-mps-control"
PIPE_VARIABLE = "CUDA_MPS_PIPE_DIRECTORY"
LOG_VARIABLE = "CUDA_MPS_LOG_DIRECTORY"
SOCKET = "control"  # what the daemon listens on, in its pipe folder
DAEMON_OUTPUT = "bpslaunch_daemon_output.log"
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 30.0
_POLL_S = 0.02
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


class MpsError(Exception):
    """MPS was asked for and cannot be had; the message says what to do."""


def requested(flag, environ):
    """Whether the job runs under MPS: --mps, or BYTEPS_MPS set to a true value."""
    value = environ.get(VARIABLE, "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise MpsError(f"{VARIABLE}={environ[VARIABLE]!r}: give 1 (run the workers under MPS) or 0")
    return flag or value in _TRUE


def run_under_daemon(environ, run_job, which=shutil.which, start_timeout=START_TIMEOUT_S,
                     stop_timeout=STOP_TIMEOUT_S):
    """run_job()'s exit code, every process it starts under a control daemon started for it: `environ`
    (os.environ, which they inherit) names the daemon while run_job runs, and is restored after. SIGINT and
    SIGTERM before the job starts end the daemon and return 128 + the signal; while it stops, they wait for it.
    A daemon named in `environ` already is used as it is. Raises MpsError when the daemon cannot start."""
    if environ.get(PIPE_VARIABLE):
        return run_job()
    control = which(CONTROL)
    if control is None:
        raise MpsError(f"--mps ({VARIABLE}=1): {CONTROL} is not on PATH. It comes with the NVIDIA driver's "
                       "utilities (nvidia-utils or nvidia-compute-utils); install them, or leave --mps out")
    folder = tempfile.mkdtemp(prefix="bps_tf_mps_")
    folders = {PIPE_VARIABLE: os.path.join(folder, "pipe"),
               LOG_VARIABLE: environ.get(LOG_VARIABLE) or os.path.join(folder, "log")}
    saved = {name: environ.get(name) for name in folders}
    try:
        daemon_env = dict(environ, **folders)
        # Signals from here on are recorded: before the job, they end it before it starts; the job's own
        # StopSignals takes over the same record (stop_signals.py).
        with StopSignals() as stop:
            daemon = _start(control, daemon_env, start_timeout, stopped=lambda: bool(stop.received))
            if stop.received:
                stop_process_groups([daemon], KILL_GRACE_S)
                return SIGNAL_EXIT_BASE + stop.received[0]
            environ.update(folders)
            try:
                return run_job()
            finally:
                _restore(environ, saved)
                _stop(control, daemon, daemon_env, stop_timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _start(control, env, timeout, stopped):
    """The daemon, once it accepts connections or `stopped()` comes true. Raises MpsError if it cannot be
    started, exits or does not listen within `timeout` s. What it prints (in the foreground its log may go
    there) goes to DAEMON_OUTPUT in its log folder."""
    try:
        for path in (env[PIPE_VARIABLE], env[LOG_VARIABLE]):
            os.makedirs(path, 0o700, exist_ok=True)
        output = open(os.path.join(env[LOG_VARIABLE], DAEMON_OUTPUT), "a+")
    except OSError as error:
        raise MpsError(f"--mps: cannot make the MPS daemon's folders ({error}); check {LOG_VARIABLE}, or leave "
                       "--mps out") from None
    with output:
        start_of_output = output.seek(0, os.SEEK_END)  # (a log folder of the user's may hold an earlier job's)
        try:
            daemon = start_in_own_group([control, "-f"], env, stdin=subprocess.DEVNULL, stdout=output,
                                        stderr=subprocess.STDOUT)
        except OSError as error:
            raise MpsError(f"--mps: cannot run {control} ({error}); or leave --mps out") from None
        try:
            deadline = time.monotonic() + timeout
            while not stopped() and not _accepts(os.path.join(env[PIPE_VARIABLE], SOCKET)):
                if daemon.poll() is not None or time.monotonic() > deadline:
                    why = (f"exited with code {daemon.returncode}" if daemon.returncode is not None
                           else f"did not accept connections within {timeout:g} s")
                    output.seek(start_of_output)
                    said = output.read().strip()[-2000:]
                    raise MpsError(f"--mps: the MPS control daemon ({control} -f) {why}"
                                   + (f"; it said:\n{said}" if said else "") +
                                   f"\nIs another MPS daemon serving this machine's GPUs (then set {PIPE_VARIABLE} "
                                   "to its pipe folder), or is a GPU in a compute mode that refuses it? Or leave "
                                   "--mps out")
                time.sleep(_POLL_S)
        except BaseException:
            stop_process_groups([daemon], KILL_GRACE_S)
            raise
    return daemon


def _accepts(path):
    """Whether a daemon listens on the Unix socket `path` (a socket's file exists before it listens). NVIDIA's
    control daemon takes sequenced packets: a stream socket's connection is refused as the wrong type."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _stop(control, daemon, env, timeout):
    """Asks the daemon to quit (which stops its MPS server too), then stops what is left of its process group."""
    deadline = time.monotonic() + timeout
    try:
        asked = subprocess.run([control], input="quit\n", env=env, text=True, capture_output=True, timeout=timeout)
        if asked.returncode == 0:
            daemon.wait(timeout=max(0.0, deadline - time.monotonic()))
    except (OSError, subprocess.TimeoutExpired):
        pass
    stop_process_groups([daemon], KILL_GRACE_S)


def _restore(environ, saved):
    for name, value in saved.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
