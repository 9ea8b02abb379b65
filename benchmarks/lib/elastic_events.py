"""The events of the elastic recovery benchmark's workers (benchmarks/workers/elastic_train.py writes them:
LOG_DIR/events.<worker id>.jsonl, one JSON object a line) and the job's worker and server processes running
now."""

import json
import os
import time
from pathlib import Path

from testing.elastic_jobs import processes_with

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def read_events(log_dir):
    """{worker id: [event, ...]} in the order each place's processes wrote them."""
    events = {}
    for path in sorted(Path(log_dir).glob("events.*.jsonl")):
        rows = []
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass  # a line being written
        events[int(path.name.split(".")[1])] = rows
    return events


def _workers(log_dir):
    # The log directory is in every worker's command line (and bpslaunch's, which has no worker id).
    return {pid: env for pid, env in processes_with(str(log_dir)).items()
            if "DMLC_WORKER_ID" in env and env.get("DMLC_ROLE") == "worker"}


def worker_pids(log_dir):
    """{worker id: pid} of the worker processes running now."""
    return {int(env["DMLC_WORKER_ID"]): pid for pid, env in _workers(log_dir).items()}


def scheduler_pids(log_dir):
    """Pids of the job's scheduler processes running now (one, but while one is started again)."""
    return _role_pids(log_dir, "scheduler")


def server_pids(log_dir):
    """Pids of the job's server processes running now (those of its workers' scheduler), by host (SLURM_NODEID)
    and then in the order they started: while none was started again, on the emulated cluster with a server
    per host server N is host N's."""
    return _role_pids(log_dir, "server")


def _role_pids(log_dir, role):
    ports = {env["DMLC_PS_ROOT_PORT"] for env in _workers(log_dir).values()}
    found = [(int(env.get("SLURM_NODEID", "0")), pid) for pid, env in processes_with("bps_tf.launcher.role").items()
             if env.get("DMLC_ROLE") == role and env.get("DMLC_PS_ROOT_PORT") in ports]
    return [pid for _, pid in sorted(found)]


def started_at(pid):
    """When process `pid` started (time.time, to the clock tick), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except OSError:
        return None
    ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime: clock ticks after boot
    return time.time() - uptime + ticks * TICK_S


def steps_of(rows, phase=None):
    return [r for r in rows if r["event"] == "step" and (phase is None or r["phase"] == phase)]


def at_full_strength(args, role):
    """Whether a step's generation has every worker (what a worker's loss waits for), every server (a
    server's) or both (the scheduler's: the one started again rebuilt the whole job)."""
    if role == "scheduler":
        return lambda step: step.get("size") == args.workers and step.get("servers") == args.servers
    key, count = ("size", args.workers) if role == "worker" else ("servers", args.servers)
    return lambda step: step.get(key) == count


def full_step_after(events, worker, after, broken, whole):
    """The worker's first step after `after` in a generation later than `broken` for which whole(step) holds
    (steps of the broken generation whose sums were complete before the kill may be logged just after it)."""
    return next((r for r in steps_of(events.get(worker, [])) if r["t"] > after and whole(r) and r["gen"] > broken),
                None)
