"""The events of the elastic recovery benchmark's workers (benchmarks/workers/elastic_train.py writes them:
LOG_DIR/events.<worker id>.jsonl, one JSON object a line) and the worker processes running now."""

import json
from pathlib import Path

from testing.elastic_jobs import processes_with


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


def worker_pids(log_dir):
    """{worker id: pid} of the worker processes running now."""
    return {int(env["DMLC_WORKER_ID"]): pid for pid, env in processes_with(str(log_dir)).items()
            if "DMLC_WORKER_ID" in env and env.get("DMLC_ROLE") == "worker"}


def steps_of(rows, phase=None):
    return [r for r in rows if r["event"] == "step" and (phase is None or r["phase"] == phase)]


def full_size_step_after(events, worker, after, size, broken):
    """The worker's first step after `after` in a generation of `size` workers later than `broken` (steps of
    the broken generation whose sums were complete before the kill may be logged just after it)."""
    return next((r for r in steps_of(events.get(worker, [])) if r["t"] > after and r["size"] == size
                 and r["gen"] > broken), None)
