"""Starting children in their own process groups, stopping whole groups, and reading how children ended."""

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time

# How long a process group has between SIGTERM and SIGKILL.
KILL_GRACE_S = 5.0
# Shells report death by signal N as exit code 128 + N.
SIGNAL_EXIT_BASE = 128
# After SIGKILL the kernel needs only a moment; this bounds the wait for it.
_REAP_TIMEOUT_S = 5.0


_PR_SET_PDEATHSIG = 1
# Bound before any fork: between fork and exec the child only calls it.
_prctl = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent():
    """In the child: the kernel sends it SIGKILL when bpslaunch dies, even by SIGKILL (no orphans)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start_in_own_group(argv, env, **popen_options):
    """Starts `argv` as the leader of a new session, so one signal to its group reaches all it spawned; it
    dies with this process."""
    return subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=_die_with_parent, **popen_options)


def signal_group(process, signum):
    """Sends `signum` to the process group that `process` leads; an already empty group is fine."""
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def stop_process_groups(processes, grace):
    """SIGTERM to each group, SIGKILL to what is left after `grace` s; returns the leaders that needed SIGKILL.

    Groups whose leader already exited are signalled too, so no stray descendant outlives the job.
    """
    for process in processes:
        signal_group(process, signal.SIGTERM)
    _wait_for_exit(processes, grace)
    needed_kill = [process for process in processes if process.poll() is None]
    for process in processes:
        signal_group(process, signal.SIGKILL)
    _wait_for_exit(needed_kill, _REAP_TIMEOUT_S)
    return needed_kill


def exit_code_of(returncode):
    """The exit code a shell would show for a child with this Popen returncode."""
    return SIGNAL_EXIT_BASE - returncode if returncode < 0 else returncode


def describe_exit(returncode):
    """'exited with code 3' or 'was killed by SIGSEGV'."""
    if returncode < 0:
        return f"was killed by {signal_name(-returncode)}"
    return f"exited with code {returncode}"


def signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code_for_start_error(error):
    """126/127 as a shell returns them when a command cannot be run / is not found."""
    return 127 if isinstance(error, FileNotFoundError) else 126


def _wait_for_exit(processes, timeout):
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return
