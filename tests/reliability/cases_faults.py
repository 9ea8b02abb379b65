"""Faults while a job runs: processes killed, frozen, failing or leaving early, and the launcher killed."""

import os
import re
import signal
import subprocess
import sys
import time

from testing.jobs import BPSLAUNCH, ManualJob, clean_env
from tests.reliability.harness import Case, Outcome, first_line_with, local_job

LOOP = "loop_until_failure.py"


def failure_seconds(out):
    match = re.search(r"failed after ([0-9.]+) s", out)
    return float(match.group(1)) if match else None


def workers_fail(job, ranks, *needles, within):
    """Every worker in `ranks` fails (exit 7) within `within` s of its last success, naming `needles`."""
    lines, slowest, held = [], 0.0, True
    for rank in ranks:
        code, out = job.wait(f"worker{rank}", timeout=60)
        seconds = failure_seconds(out)
        held &= code == 7 and seconds is not None and seconds <= within and all(n in out for n in needles)
        slowest = max(slowest, seconds or 0)
        lines.append(first_line_with(out, "failed after"))
    return Outcome(held, lines[0] if lines else "", slowest)


def wait_joined(job, timeout=60):
    """Until every worker of `job` printed that it joined (then loops over push_pull)."""
    deadline = time.monotonic() + timeout
    workers = [name for name in job.processes if name.startswith("worker")]
    while time.monotonic() < deadline and not all("joined" in job.output(w) for w in workers):
        time.sleep(0.1)
    time.sleep(0.5)


def signal_case(name, target, signum, expected, *needles, timeout_s=20, within=10, ranks=(0, 1)):
    def run():
        with ManualJob(len(ranks) + (1 if target.startswith("worker") else 0), 2, LOOP, BYTEPS_TIMEOUT=timeout_s) as job:
            wait_joined(job)
            os.killpg(job.processes[target].pid, signum)
            outcome = workers_fail(job, ranks, *needles, within=within)
            if signum == signal.SIGSTOP:
                os.killpg(job.processes[target].pid, signal.SIGCONT)
            return outcome
    return Case("fault", name, expected, run)


def lifecycle_case(name, mode, expected, *needles, within=10):
    def run():
        with ManualJob(2, 1, "lifecycle.py", mode, BYTEPS_TIMEOUT=120) as job:
            job.wait("worker1", timeout=60)
            return workers_fail(job, [0], *needles, within=within)
    return Case("fault", name, expected, run)


def interrupted_worker():
    with ManualJob(2, 1, LOOP, BYTEPS_TIMEOUT=120) as job:
        wait_joined(job)
        job.processes["worker1"].send_signal(signal.SIGINT)
        return workers_fail(job, [0], "worker 1", "KeyboardInterrupt", within=10)


def killed_launcher(signum):
    def run():
        launcher = subprocess.Popen([BPSLAUNCH, "--local", "--workers", "2", "--servers", "1", "--", sys.executable,
                                     "-c", "import time; time.sleep(300)"], env=clean_env())
        children = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(children) < 4:
            children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == launcher.pid]
            time.sleep(0.1)
        started = time.monotonic()
        launcher.send_signal(signum)
        launcher.wait(timeout=30)
        while time.monotonic() - started < 15 and any(_alive(p) for p in children):
            time.sleep(0.1)
        left = [p for p in children if _alive(p)]
        for p in left:
            os.kill(p, signal.SIGKILL)
        return Outcome(len(children) >= 4 and not left, f"{len(children)} children, {len(left)} left after the launcher "
                       "ended", time.monotonic() - started)
    return run


def _parent(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        return None


def _alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def second_generation():
    with ManualJob(2, 2, "lifecycle.py", "generations", BYTEPS_TIMEOUT=60) as job:
        outs = [job.wait(f"worker{r}", timeout=60)[1] for r in range(2)]
    held = all("generation 1 exact" in out for out in outs)
    return Outcome(held, first_line_with(outs[0], "generation 1"))


def init_after_failure():
    with ManualJob(2, 1, "lifecycle.py", "reinit-after-failure", BYTEPS_TIMEOUT=60) as job:
        _, out = job.wait("worker0", timeout=60)
    line = first_line_with(out, "init again")
    return Outcome("a new job needs new processes" in out, line)


def exit_without_shutdown():
    code = ("import numpy as np, bps_tf.numpy as bps\nbps.init()\n"
            "bps.push_pull(np.ones(3, np.float32), 'x', average=False)\nprint('done')")
    run = local_job(code)
    return Outcome(run.code == 0 and run.out.count("done") == 2, f"exit code {run.code}", run.seconds)


CASES = [
    signal_case("kill -9 a server", "server1", signal.SIGKILL, "every worker fails at once, naming the server",
                "server"),
    signal_case("kill -9 a worker", "worker2", signal.SIGKILL, "the others fail at once, naming it", "worker 2"),
    signal_case("kill -9 the scheduler", "scheduler", signal.SIGKILL, "every worker fails at once", "scheduler"),
    signal_case("SIGSTOP the scheduler (BYTEPS_TIMEOUT=5)", "scheduler", signal.SIGSTOP,
                "every worker fails within BYTEPS_TIMEOUT", timeout_s=5, within=12),
    signal_case("SIGSTOP a server (BYTEPS_TIMEOUT=5)", "server0", signal.SIGSTOP,
                "every worker fails within BYTEPS_TIMEOUT, naming the server", "server", timeout_s=5, within=12),
    signal_case("SIGSTOP a worker (BYTEPS_TIMEOUT=5)", "worker2", signal.SIGSTOP,
                "the others fail within BYTEPS_TIMEOUT, naming it", "worker", timeout_s=5, within=12),
    lifecycle_case("an uncaught exception in one worker", "raise",
                   "the others fail within seconds, naming the worker and the exception", "worker 1", "ValueError"),
    lifecycle_case("sys.exit(1) in one worker mid-training", "exit",
                   "the others fail at once: it finished without pushing", "worker(s) 1 finished"),
    Case("fault", "Ctrl-C (SIGINT) in one worker", "the others fail within seconds, naming it and KeyboardInterrupt",
         interrupted_worker),
    Case("fault", "kill -9 of bpslaunch --local", "every process it started dies with it",
         killed_launcher(signal.SIGKILL)),
    Case("fault", "SIGTERM to bpslaunch --local", "every process it started stops", killed_launcher(signal.SIGTERM)),
    Case("fault", "shutdown() then init() in the same processes", "a second generation runs, sums exact",
         second_generation),
    Case("fault", "init() after the job failed", "an error at once: a failed job needs new processes",
         init_after_failure),
    Case("fault", "a worker ends without calling shutdown()", "it leaves at exit; the job ends cleanly",
         exit_without_shutdown),
]
