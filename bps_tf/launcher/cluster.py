"""Cluster mode: this machine plays the one role that DMLC_ROLE names."""

import functools
import math
import os
import subprocess
import sys
import time

from bps_tf.launcher.child_processes import (
    KILL_GRACE_S,
    describe_exit,
    exit_code_for_start_error,
    exit_code_of,
    signal_group,
    signal_name,
    start_in_own_group,
    stop_process_groups,
)
from bps_tf import tf_environment
from bps_tf._native import load_core
from bps_tf.launcher import allocator
from bps_tf.launcher.output import DRAIN_TIMEOUT_S, PrefixedOutput, is_shown, report, worker_label, worker_rank
from bps_tf.launcher.role import run_this_role
from bps_tf.launcher.stop_signals import StopSignals

_POLL_INTERVAL_S = 0.05


def run_cluster_role(command, output_ranks=None):
    """Plays the role in DMLC_ROLE; `command` is the training command and `output_ranks` the worker ranks whose
    output is shown (None: all); both are used by workers only."""
    role = os.environ.get("DMLC_ROLE", "")
    if role in ("scheduler", "server"):
        if not allocator.in_effect(os.environ):
            # This process started without the malloc it should preload (launcher/allocator.py): it becomes
            # one that has it, under the same process id.
            # (With this process's module path, so that it finds the same bps_tf.)
            env = allocator.apply(dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
            os.execve(sys.executable, [sys.executable, "-m", "bps_tf.launcher.role"], env)
        return run_this_role()
    if role == "worker":
        return run_worker_command(command, output_ranks=output_ranks)
    if not role:
        report("DMLC_ROLE is not set: set it to scheduler, server or worker (with the other DMLC_* variables) "
               "to join a cluster job, or run a whole job on this host with "
               "`bpslaunch --local --workers N --servers M -- CMD`")
    else:
        report(f"DMLC_ROLE must be scheduler, server or worker, not {role!r}")
    return 1


def run_worker_command(command, kill_grace=KILL_GRACE_S, stdout=None, stderr=None, output_ranks=None):
    """Checks the environment, runs `command` with it, passes on SIGINT/SIGTERM; returns the command's exit code.

    With BYTEPS_LOCAL_SIZE=K > 1 and no BYTEPS_LOCAL_RANK, runs the K worker processes of this machine: K copies
    of the command with BYTEPS_LOCAL_RANK=0..K-1 (each picks its GPU by local rank), their output prefixed;
    the first to fail stops the others and gives the exit code.
    kill_grace: seconds the command has to exit after the first signal (or after a sibling failed) before it is
    killed. stdout, stderr: text streams that receive the K copies' prefixed output (default: ours).
    output_ranks: the worker ranks whose output is shown (None: all); a hidden process's output goes through a
    pipe and is dropped, except the tail of its stderr if it fails.
    """
    if not command:
        report("DMLC_ROLE=worker needs the training command, e.g. `bpslaunch python train.py`")
        return 1
    try:
        load_core().validate_environment()
        local_size = _copies_to_start()
        shown = [is_shown(rank, output_ranks) for rank in _ranks_of_copies(local_size)]
    except (ValueError, RuntimeError) as error:  # bad environment or missing core
        report(str(error))
        return 1
    output = PrefixedOutput(stdout, stderr)
    label = functools.partial(worker_label, os.environ.get("DMLC_WORKER_ID", "0"), local_size=local_size)
    children = []
    # Handlers go in before the first child starts, so no signal can end bpslaunch and orphan a child.
    with StopSignals() as stop:
        try:
            for local_rank in range(local_size):
                children.append(_start_copy(command, local_rank, local_size, label(local_rank), output,
                                            shown[local_rank]))
        except OSError as error:
            output.report(f"cannot run {command[0]}: {error}")
            return exit_code_for_start_error(error)
        else:
            failed = _wait_forwarding_signals(children, stop, kill_grace, output)
            if failed is not None and local_size > 1 and not stop.received:
                output.report(f"{label(children.index(failed))} {describe_exit(failed.returncode)}; "
                              "stopping the others")
        finally:
            # After a signal the grace period is used up by now: kill at once what is left of the process trees.
            output.stopping(children)
            needed_kill = stop_process_groups(children, grace=0 if stop.received else kill_grace)
            output.wait_until_drained(DRAIN_TIMEOUT_S)
    if needed_kill:
        names = ("the worker command" if local_size == 1
                 else ", ".join(label(children.index(child)) for child in needed_kill))
        cause = signal_name(stop.received[0]) if stop.received else "SIGTERM"
        output.report(f"{names} did not exit within {kill_grace:g} s of {cause}; "
                      + ("killed it" if local_size == 1 else "killed"))
    if failed is None:  # none failed on its own; maybe some were killed
        failed = next((child for child in children if child.returncode != 0), None)
    return 0 if failed is None else exit_code_of(failed.returncode)


def _copies_to_start():
    """BYTEPS_LOCAL_SIZE, unless BYTEPS_LOCAL_RANK says this process is already one of the machine's processes
    (started one by one, e.g. by a batch system). The core has checked both variables."""
    if os.environ.get("BYTEPS_LOCAL_RANK", "").strip():
        return 1
    return int(os.environ.get("BYTEPS_LOCAL_SIZE", "").strip() or 1)


def _ranks_of_copies(copies):
    """The job ranks of the processes this bpslaunch starts (the core has checked the variables)."""
    worker_id = int(os.environ.get("DMLC_WORKER_ID", "").strip() or 0)
    machine_size = int(os.environ.get("BYTEPS_LOCAL_SIZE", "").strip() or 1)
    set_local_rank = os.environ.get("BYTEPS_LOCAL_RANK", "").strip()
    local_ranks = [int(set_local_rank)] if set_local_rank else range(copies)
    return [worker_rank(worker_id, local_rank, machine_size) for local_rank in local_ranks]


def _start_copy(command, local_rank, local_size, label, output, shown):
    if local_size == 1 and shown:
        # Its own group: a terminal's Ctrl-C reaches only us, and we pass it on once, to the whole tree.
        # Its output goes straight to our terminal, which it may recognise as one.
        return start_in_own_group(command, env=allocator.apply(tf_environment.apply(os.environ.copy())))
    # Output goes through pipes; unbuffered, each line shows up when it is printed, not at exit.
    env = allocator.apply(tf_environment.apply(dict(os.environ, PYTHONUNBUFFERED="1")))
    if local_size > 1:
        env["BYTEPS_LOCAL_RANK"] = str(local_rank)
    child = start_in_own_group(command, env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    output.follow(label, child, shown)
    return child


def _wait_forwarding_signals(children, stop, kill_grace, output):
    """Waits until every child exited or, before any stop signal, one failed; returns the first that failed.

    Passes each stop signal on to every child and gives up `kill_grace` seconds after the first one. After a
    signal a failure does not end the wait: the other children get their time to exit too.
    """
    forwarded = 0
    give_up_at = math.inf
    first_failed = None
    while time.monotonic() < give_up_at:
        if first_failed is None:
            first_failed = next((child for child in children if child.poll() not in (None, 0)), None)
        if all(child.poll() is not None for child in children) or (first_failed is not None and not stop.received):
            break
        if stop.received and forwarded == 0:
            output.stopping(children)
        for signum in stop.received[forwarded:]:
            for child in children:
                signal_group(child, signum)
        if stop.received and forwarded == 0:
            give_up_at = time.monotonic() + kill_grace
        forwarded = len(stop.received)
        time.sleep(_POLL_INTERVAL_S)
    return first_failed
