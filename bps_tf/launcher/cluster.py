"""Cluster mode: this machine plays the one role that DMLC_ROLE names."""

import math
import os
import time

from bps_tf.launcher.child_processes import (
    KILL_GRACE_S,
    exit_code_for_start_error,
    exit_code_of,
    signal_group,
    signal_name,
    start_in_own_group,
    stop_process_groups,
)
from bps_tf.launcher.native_core import load_core
from bps_tf.launcher.output import report
from bps_tf.launcher.role import run_this_role
from bps_tf.launcher.stop_signals import StopSignals

_POLL_INTERVAL_S = 0.05


def run_cluster_role(command):
    """Plays the role in DMLC_ROLE; `command` is the training command (used by workers only)."""
    role = os.environ.get("DMLC_ROLE", "")
    if role in ("scheduler", "server"):
        return run_this_role()
    if role == "worker":
        return run_worker_command(command)
    if not role:
        report("DMLC_ROLE is not set: set it to scheduler, server or worker (with the other DMLC_* variables) "
               "to join a cluster job, or run a whole job on this host with "
               "`bpslaunch --local --workers N --servers M -- CMD`")
    else:
        report(f"DMLC_ROLE must be scheduler, server or worker, not {role!r}")
    return 1


def run_worker_command(command, kill_grace=KILL_GRACE_S):
    """Checks the environment, runs `command` with it, passes on SIGINT/SIGTERM; returns the command's exit code.

    kill_grace: seconds the command has to exit after the first signal before it is killed.
    """
    if not command:
        report("DMLC_ROLE=worker needs the training command, e.g. `bpslaunch python train.py`")
        return 1
    try:
        load_core().validate_environment()
    except (ValueError, RuntimeError) as error:  # bad environment or missing core
        report(str(error))
        return 1
    # Handlers go in before the child starts, so no signal can end bpslaunch and orphan the child.
    with StopSignals() as stop:
        try:
            # Its own group: a terminal's Ctrl-C reaches only us, and we pass it on once, to the whole tree.
            child = start_in_own_group(command, env=os.environ.copy())
        except OSError as error:
            report(f"cannot run {command[0]}: {error}")
            return exit_code_for_start_error(error)
        try:
            _wait_forwarding_signals(child, stop, kill_grace)
        finally:
            # Its grace period is used up by now: kill at once what is left of the command's process tree.
            needed_kill = stop_process_groups([child], grace=0)
    if needed_kill:
        report(f"the worker command did not exit within {kill_grace:g} s of {signal_name(stop.received[0])}; "
               "killed it")
    return exit_code_of(child.returncode)


def _wait_forwarding_signals(child, stop, kill_grace):
    """Waits for `child`, passing each stop signal on; gives up `kill_grace` seconds after the first one."""
    forwarded = 0
    give_up_at = math.inf
    while child.poll() is None and time.monotonic() < give_up_at:
        for signum in stop.received[forwarded:]:
            signal_group(child, signum)
        if stop.received and forwarded == 0:
            give_up_at = time.monotonic() + kill_grace
        forwarded = len(stop.received)
        time.sleep(_POLL_INTERVAL_S)
