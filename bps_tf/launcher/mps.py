"""--mps (BYTEPS_MPS=1): NVIDIA's Multi-Process Service for the worker processes that share a machine's GPUs.

Several processes on one GPU take turns on it without MPS (time slices of the whole GPU): while one process's
kernels run, another's copies to and from the host wait. Under MPS their kernels and copies run at once. With
2 workers sharing one GPU through a server on the host, the encoder of docs/gpu.md trained 1.10x (mixed
precision) and 1.12x (float32) faster under MPS. It is meant for processes that share a GPU.

bpslaunch starts a control daemon of the job's own (`nvidia-cuda-mps-control -f`, a child process, its pipe
and log folders in a private temporary folder), gives every process it starts CUDA_MPS_PIPE_DIRECTORY and
CUDA_MPS_LOG_DIRECTORY, and quits the daemon when the job ends. CUDA connects a process to the daemon when it
first initializes; a process that cannot connect runs without MPS, which is why bpslaunch waits for the
daemon's socket before it starts any process. A CUDA_MPS_PIPE_DIRECTORY set already names a daemon that
someone else runs: the job uses it and bpslaunch starts none.

This module imports nothing heavy: the launcher uses it before any process starts.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time

VARIABLE = "BYTEPS_MPS"
CONTROL = "nvidia-cuda-mps-control"
PIPE_VARIABLE = "CUDA_MPS_PIPE_DIRECTORY"
LOG_VARIABLE = "CUDA_MPS_LOG_DIRECTORY"
SOCKET = "control"  # what the daemon listens on, in its pipe folder
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


@contextlib.contextmanager
def job_daemon(environ, enabled, which=shutil.which, start_timeout=START_TIMEOUT_S, stop_timeout=STOP_TIMEOUT_S):
    """While the job runs: `environ` (os.environ: every process started meanwhile inherits it) names a control
    daemon started for the job, which is quit on leaving. Nothing if not `enabled` or a daemon is named already.
    Raises MpsError when the daemon cannot be started."""
    if not enabled or environ.get(PIPE_VARIABLE):
        yield
        return
    control = which(CONTROL)
    if control is None:
        raise MpsError(f"--mps ({VARIABLE}=1): {CONTROL} is not on PATH. It comes with the NVIDIA driver's "
                       "utilities (nvidia-utils or nvidia-compute-utils); install them, or leave --mps out")
    folder = tempfile.mkdtemp(prefix="bps_tf_mps_")
    folders = {PIPE_VARIABLE: os.path.join(folder, "pipe"), LOG_VARIABLE: os.path.join(folder, "log")}
    try:
        for path in folders.values():
            os.mkdir(path, 0o700)
        daemon_env = dict(environ, **folders)
        daemon = _start(control, daemon_env, folder, start_timeout)
        try:
            environ.update(folders)
            try:
                yield
            finally:
                for name in folders:
                    environ.pop(name, None)
        finally:
            _stop(control, daemon, daemon_env, stop_timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _start(control, env, folder, timeout):
    """The daemon, once it listens (its socket exists)."""
    output = open(os.path.join(folder, "daemon.out"), "w+")
    with output:
        # A process group of its own: stopping it reaches the MPS server it starts as well.
        daemon = subprocess.Popen([control, "-f"], env=env, stdin=subprocess.DEVNULL, stdout=output,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        socket = os.path.join(env[PIPE_VARIABLE], SOCKET)
        deadline = time.monotonic() + timeout
        while not os.path.exists(socket):
            if daemon.poll() is not None or time.monotonic() > deadline:
                why = "exited" if daemon.returncode is not None else f"did not listen within {timeout:g} s"
                _kill(daemon)
                output.seek(0)
                said = output.read().strip()[-2000:]
                raise MpsError(f"--mps: the MPS control daemon ({control} -f) {why}"
                               + (f"; it said:\n{said}" if said else "") +
                               "\nIs another MPS daemon running on this machine for the same GPUs (then set "
                               f"{PIPE_VARIABLE} to its pipe folder), or is the GPU in a compute mode that "
                               "refuses it? Or leave --mps out")
            time.sleep(_POLL_S)
    return daemon


def _stop(control, daemon, env, timeout):
    """Asks the daemon to quit (it stops its MPS server too), and stops it by signal if it does not."""
    deadline = time.monotonic() + timeout
    try:
        subprocess.run([control], input="quit\n", env=env, text=True, capture_output=True, timeout=timeout)
        daemon.wait(timeout=max(0.1, deadline - time.monotonic()))
    except (OSError, subprocess.TimeoutExpired):
        _kill(daemon)


def _kill(daemon):
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(daemon.pid, sig)
        try:
            daemon.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
