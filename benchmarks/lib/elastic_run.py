"""One run of the elastic recovery benchmark: its job started, each worker and server of --kills killed in turn
while the job trains, the rejoin of each awaited, stalls watched for; what the analysis needs is returned and kept in
LOG_DIR/run.json."""

import json
import os
import shutil
import signal
import time
from pathlib import Path

from benchmarks.lib import netns
from benchmarks.lib.elastic_events import (at_full_strength, full_step_after, read_events, scheduler_pids,
                                           server_pids, started_at, steps_of, worker_pids)
from benchmarks.lib.elastic_launchers import ClusterJob, LocalJob, network_counters
from benchmarks.lib.results import product_version

STUCK_S = 5.0  # when no worker completed a step for this long, every worker prints its Python stack


class Watch:
    """Waits for the job's events; when no worker completed a step for STUCK_S, every worker prints its Python
    stack to its log (SIGUSR1), once per stall, and the stall is recorded."""

    def __init__(self, job, log_dir, deadline):
        self.job, self.log_dir, self.deadline = job, log_dir, deadline
        self.stalls = []

    def until(self, what, condition, poll=0.05):
        """Waits until condition(events) returns something true; returns it."""
        while time.monotonic() < self.deadline:
            events = read_events(self.log_dir)
            found = condition(events)
            if found:
                return found
            self._check_stall(events)
            if all(launcher.poll() is not None for launcher in self.job.launchers):
                break
            time.sleep(poll)
        tails = "".join(f"\n--- {name}:\n{text[-3000:]}" for name, text in self.job.logs().items())
        raise RuntimeError(f"the job never got to {what}{tails}")

    def idle(self, seconds):
        """Lets the job train for `seconds`, watching for stalls."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self._check_stall(read_events(self.log_dir))
            time.sleep(0.1)

    def _check_stall(self, events):
        steps = [r["t"] for rows in events.values() for r in steps_of(rows, "recovery")]
        if not steps or time.time() - max(steps) < STUCK_S or any(s["after"] == max(steps) for s in self.stalls):
            return
        self.stalls.append({"after": max(steps)})
        started = {r["pid"] for rows in events.values() for r in rows if r["event"] == "start"}  # handler set
        for pid in worker_pids(self.log_dir).values():
            if pid in started:
                os.kill(pid, signal.SIGUSR1)
        print(f"no worker completed a step for {STUCK_S:g} s; their stacks are in the logs", flush=True)


def run_kills(args, job, log_dir, watch):
    """Kills each worker, server and scheduler of --kills in turn; returns the kill times and pids (and for a
    server or the scheduler, when the one started again in its place started)."""
    everyone = range(args.workers)
    watch.until("the recovery phase", lambda ev: all(steps_of(ev.get(w, []), "recovery") for w in everyone))
    start = max(steps_of(read_events(log_dir)[w], "recovery")[0]["t"] for w in everyone)
    print(f"commit-cost segments done; training with {args.workers} workers", flush=True)
    watch.idle(args.warmup_s)
    servers = server_pids(log_dir)  # server N: the job's N-th (each is killed once at most)
    seen = set(servers) | set(scheduler_pids(log_dir))
    kills = []
    for role, target in args.kills:
        pid = {"worker": lambda: worker_pids(log_dir)[target], "server": lambda: servers[target],
               "scheduler": lambda: scheduler_pids(log_dir)[0]}[role]()
        broken = max(r["gen"] for rows in read_events(log_dir).values() for r in steps_of(rows))
        killed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        print(f"killed {role} {target} (pid {pid})", flush=True)
        survivors = [w for w in everyone if (role, w) != ("worker", target)]
        watch.until(f"the survivors' steps after killing {role} {target}",
                    lambda ev: all(any(r["t"] > killed_at for r in steps_of(ev.get(w, []))) for w in survivors))
        # a lost worker is back at its own first step with every worker; a lost server at the workers' first
        # step with every server
        whole, reference = at_full_strength(args, role), target if role == "worker" else survivors[0]
        back = watch.until(f"{role} {target}'s rejoin",
                           lambda ev: full_step_after(ev, reference, killed_at, broken, whole))
        print(f"{role} {target} rejoined {back['t'] - killed_at:.1f} s after the kill", flush=True)
        kill = {role: target, "pid": pid, "t": killed_at}
        if role != "worker":
            running = server_pids(log_dir) if role == "server" else scheduler_pids(log_dir)
            replacement = next((p for p in running if p not in seen), None)
            seen.add(replacement)
            kill["restarted_at"] = started_at(replacement)
        kills.append(kill)
        watch.idle(args.settle_s)
    (Path(log_dir) / "stop").touch()
    return start, kills


def wait_for_end(job, deadline):
    for launcher in job.launchers:
        launcher.wait(timeout=max(1, deadline - time.monotonic()))
    return [launcher.returncode for launcher in job.launchers]


def run_job(args, log_dir):
    """Runs the job and its kills; returns what the analysis needs, also written to LOG_DIR/run.json."""
    deadline = time.monotonic() + args.timeout
    cluster = job = None
    try:
        if args.local:
            job = LocalJob(args, log_dir)
        else:
            cluster = netns.EmulatedCluster([f"n{i}" for i in range(args.workers)], args.rate).__enter__()
            job = ClusterJob(args, cluster, log_dir)
        watch = Watch(job, log_dir, deadline)
        start, kills = run_kills(args, job, log_dir, watch)
        codes = wait_for_end(job, deadline)
        if any(codes):
            tails = "".join(f"\n--- {name}:\n{text[-3000:]}" for name, text in job.logs().items())
            raise RuntimeError(f"the job failed (exit codes {codes}){tails}")
        run = {"start": start, "kills": kills, "job_command": job.command, "stalls": watch.stalls,
               "launcher_restarts": sum(text.count("starting it again") for text in job.logs().values()),
               "network_counters": network_counters(cluster) if cluster is not None else None,
               "product": product_version()}
        (log_dir / "run.json").write_text(json.dumps(run, indent=1))
        return run
    finally:
        if job is not None:
            job.close()
        if args.keep_logs:
            shutil.copytree(log_dir, args.keep_logs, dirs_exist_ok=True)
        if cluster is not None:
            cluster.__exit__(None, None, None)
