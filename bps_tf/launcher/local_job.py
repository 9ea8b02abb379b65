"""--local mode: one scheduler, M servers and N worker machines of K processes each on this host, supervised until
the job ends (the Supervisor also runs one machine's processes of a cluster manager's job: node_job.py)."""

import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from bps_tf.launcher.child_processes import (
    KILL_GRACE_S,
    SIGNAL_EXIT_BASE,
    describe_exit,
    exit_code_for_start_error,
    exit_code_of,
    signal_name,
    start_in_own_group,
    stop_process_groups,
)
from bps_tf.launcher.elastic_end import JoinedFiles, end_of_elastic_job
from bps_tf.launcher.local_env import find_free_port, job_environment, role_environment
from bps_tf.launcher.output import DRAIN_TIMEOUT_S, PrefixedOutput, is_shown, worker_label, worker_rank
from bps_tf.launcher.stop_signals import StopSignals

DEFAULT_ROLE_COMMAND = (sys.executable, "-m", "bps_tf.launcher.role")
DEFAULT_SHUTDOWN_GRACE_S = 30.0
# What coreutils `timeout` returns when its limit is reached.
TIMEOUT_EXIT_CODE = 124
_POLL_INTERVAL_S = 0.05
# How long a lost worker of an elastic job waits to be started again while its scheduler and servers may be
# about to fail (the job was aborted), in which case it is not.
_JOB_FAILURE_GRACE_S = 0.5


def run_local_job(command, num_workers, num_servers, *, local_size=1, timeout=None,
                  shutdown_grace=DEFAULT_SHUTDOWN_GRACE_S, kill_grace=KILL_GRACE_S, role_command=DEFAULT_ROLE_COMMAND,
                  output_ranks=None, stdout=None, stderr=None, elastic=None, max_restarts=0):
    """Runs a whole job on this host and returns bpslaunch's exit code.

    command: the worker's argv. num_workers: worker machines, each running `local_size` worker processes
    (BYTEPS_LOCAL_RANK 0..local_size-1; the command picks its GPU by local rank).
    timeout: wall-clock limit in seconds for the whole job (None: no limit).
    shutdown_grace: how long the scheduler and servers may take to exit once all workers succeeded.
    kill_grace: seconds between SIGTERM and SIGKILL when stopping processes.
    role_command: argv that runs a scheduler or server (DMLC_ROLE tells which); tests pass stand-ins.
    output_ranks: the worker ranks whose output is shown (None: all); the scheduler's and servers' always is.
    stdout, stderr: text streams that receive the prefixed output (default: ours).
    elastic: (min workers, max workers) of an elastic job, whose lost workers (and servers, while another is
    left) do not end it; each is started again at most `max_restarts` times (docs/elastic.md).
    """
    job_env = job_environment(os.environ, num_workers, num_servers, find_free_port(), elastic)
    launches = [Launch("scheduler", list(role_command), role_environment(job_env, "scheduler"))]
    launches += [Launch(f"server {index}", list(role_command), role_environment(job_env, "server"))
                 for index in range(num_servers)]
    launches += [Launch(worker_label(machine, local_rank, local_size), list(command),
                        role_environment(job_env, "worker", machine, local_rank, local_size), worker=True,
                        shown=is_shown(worker_rank(machine, local_rank, local_size), output_ranks))
                 for machine in range(num_workers) for local_rank in range(local_size)]
    restarts = WorkerRestarts(max_restarts) if elastic is not None else None
    return Supervisor(launches, timeout, shutdown_grace, kill_grace, PrefixedOutput(stdout, stderr), restarts).run()


@dataclass
class Launch:
    """One process to start: its label ("scheduler", "server 1", "worker 0", with --local-size > 1 "worker
    0.1": machine 0, local rank 1; the output prefix and the name in messages), argv and environment."""
    label: str
    argv: list
    env: dict
    worker: bool = False
    shown: bool = True


@dataclass
class _JobProcess:
    label: str
    popen: subprocess.Popen
    launch: Launch = None
    joined_file: str = None  # elastic: the file the worker process creates once it joined the job


class WorkerRestarts:
    """An elastic job's worker and server processes that fail are started again, at most `limit` times per
    place (its label): the job goes on meanwhile and the new process rejoins it."""

    def __init__(self, limit):
        self.limit = limit
        self._used = {}

    def take(self, label):
        """Whether `label` may be started again; counts the restart."""
        used = self._used.get(label, 0)
        if used >= self.limit:
            return False
        self._used[label] = used + 1
        return True

    def used(self, label):
        return self._used.get(label, 0)


class Supervisor:
    """Starts processes and supervises them until the workers succeed (then the others must exit within
    `shutdown_grace`), one fails, `timeout` passes or a stop signal comes. Without workers it waits for the
    others to succeed."""

    def __init__(self, launches, timeout, shutdown_grace, kill_grace, output, restarts=None):
        self._launches = launches
        # An elastic job (restarts given): a failed worker or server is started again or left behind while the
        # job goes on; only the scheduler's failure ends the job here.
        self._restarts = restarts
        self._joined_files = JoinedFiles() if restarts is not None else None
        self._left_behind = []
        self._timeout = timeout
        self._shutdown_grace = shutdown_grace
        self._kill_grace = kill_grace
        self._output = output
        self._roles = []  # scheduler and servers
        self._workers = []

    def run(self):
        # Signals are recorded from before the first start, so nothing started can be left behind.
        with StopSignals() as stop:
            try:
                start_failure_code = self._start_all()
                if start_failure_code is not None:
                    return start_failure_code
                return self._supervise(stop)
            finally:
                everyone = [process.popen for process in self._roles + self._workers + self._left_behind]
                self._output.stopping(everyone)
                stop_process_groups(everyone, self._kill_grace)
                self._output.wait_until_drained(DRAIN_TIMEOUT_S)
                if self._joined_files is not None:
                    self._joined_files.remove()

    def _start_all(self):
        """Starts every process; on failure reports it and returns the exit code, else returns None."""
        for launch in self._launches:
            try:
                process = self._start(launch)
            except OSError as error:
                self._output.report(f"cannot start {launch.label} ({launch.argv[0]}): {error}")
                return exit_code_for_start_error(error)
            (self._workers if launch.worker else self._roles).append(process)
        if not self._workers:  # a machine of servers only: they end when the job does
            self._workers, self._roles = self._roles, []
        return None

    def _start(self, launch):
        env, joined_file = launch.env, None
        if launch.worker and self._joined_files is not None:
            env, joined_file = self._joined_files.environment(launch.env)
        popen = start_in_own_group(launch.argv, env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        self._output.follow(launch.label, popen, launch.shown)
        return _JobProcess(launch.label, popen, launch, joined_file)

    def _job_goes_on_without(self, lost):
        """Elastic: whether the job goes on without worker or server `lost`, which failed. A process also fails
        when the whole job does (the scheduler aborted it: the last server was lost, say), and one may fail
        just as the job ends: then it is reported as in any job, or once the job ended, and nothing restarts."""
        others = [role for role in self._roles if role is not lost]
        deadline = time.monotonic() + _JOB_FAILURE_GRACE_S
        while time.monotonic() < deadline and all(role.popen.poll() is None for role in others):
            time.sleep(_POLL_INTERVAL_S)
        return all(role.popen.poll() is None for role in others)

    def _replace_lost(self, lost):
        """Elastic: starts worker or server `lost` again if it may be, else leaves it behind; the job goes on."""
        group = self._workers if lost in self._workers else self._roles
        group.remove(lost)
        how = describe_exit(lost.popen.returncode)
        if self._restarts.take(lost.label):
            self._output.report(f"{lost.label} {how}; starting it again (restart {self._restarts.used(lost.label)} "
                                f"of {self._restarts.limit}): it rejoins the job")
            try:
                group.append(self._start(lost.launch))
                self._left_behind.append(lost)
                return
            except OSError as error:
                self._output.report(f"cannot start {lost.label} again: {error}")
        else:
            self._output.report(f"{lost.label} {how}; the job goes on without it (--max-restarts "
                                f"{self._restarts.limit})")
        self._left_behind.append(lost)

    def _supervise(self, stop):
        """Waits until the job succeeds, fails, times out or is interrupted; returns the exit code."""
        deadline = math.inf if self._timeout is None else time.monotonic() + self._timeout
        workers_done_at = None
        while True:
            if stop.received:
                signum = stop.received[0]
                self._output.report(f"received {signal_name(signum)}; stopping all processes")
                return SIGNAL_EXIT_BASE + signum
            if self._restarts is not None and self._roles and all(r.popen.poll() == 0 for r in self._roles):
                # The elastic job ended well: its workers are still exiting, or never joined it.
                return end_of_elastic_job(self._workers, self._shutdown_grace, self._output)
            failed = self._first_failed()
            if failed is not None and self._restarts is not None and self._may_go_on_without(failed):
                if self._job_goes_on_without(failed):
                    self._replace_lost(failed)
                    if not self._workers:
                        self._output.report("no worker of this machine is left; stopping all processes")
                        return exit_code_of(failed.popen.returncode)
                    continue
                if all(role.popen.poll() in (None, 0) for role in self._roles):
                    failed = None  # the job ended well meanwhile: its end reports this worker
                else:  # the job failed: its scheduler says which worker's failure ended it, and how
                    failed = next(role for role in self._roles if role.popen.poll() not in (None, 0))
            if failed is not None:
                self._output.report(f"{failed.label} {describe_exit(failed.popen.returncode)}; "
                                    "stopping all processes")
                return exit_code_of(failed.popen.returncode)
            if all(worker.popen.poll() is not None for worker in self._workers):
                lingering = [role for role in self._roles if role.popen.poll() is None]
                if not lingering:
                    return 0
                if workers_done_at is None:
                    workers_done_at = time.monotonic()
                elif time.monotonic() - workers_done_at > self._shutdown_grace:
                    names = ", ".join(role.label for role in lingering)
                    self._output.report(f"all workers finished, but {names} did not exit within "
                                        f"{self._shutdown_grace:g} s; killing them")
                    return 1
            if time.monotonic() >= deadline:
                self._output.report(f"the job did not finish within --timeout {self._timeout:g} s; "
                                    "stopping all processes")
                return TIMEOUT_EXIT_CODE
            time.sleep(_POLL_INTERVAL_S)

    def _may_go_on_without(self, failed):
        """Elastic: the job may go on without a worker while this machine's scheduler or servers run, and without
        a server wherever it ran (the scheduler drops it while another server is left). Where the scheduler
        runs here, _job_goes_on_without sees whether it failed; elsewhere a server started again learns it.
        A scheduler killed by a signal (a crash, an OOM kill, a preempted machine) is started again at the same
        address, where the servers and workers register again; one that exited has ended the job (it aborts it
        with a reason every process reports)."""
        if failed.label.startswith("server"):
            return True
        if failed.label == "scheduler":
            return failed.popen.returncode < 0
        return failed in self._workers and bool(self._roles)

    def _first_failed(self):
        # Workers first: when a worker dies, the scheduler and servers often fail right after, in reaction. In
        # an elastic job workers and servers are lost while it goes on: once the job failed, its scheduler says
        # why (or the server, where no other is left).
        elastic_job_failed = self._restarts is not None and any(r.popen.poll() not in (None, 0) for r in self._roles)
        for process in (self._roles + self._workers if elastic_job_failed else self._workers + self._roles):
            if process.popen.poll() not in (None, 0):
                return process
        return None
