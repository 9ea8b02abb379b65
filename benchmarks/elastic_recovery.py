"""Elastic training under failures: Keras 3 `fit` with bps_tf.keras.elastic (the Horovod API) in one elastic
job, whose workers the benchmark kills with SIGKILL one after another; bpslaunch (--max-restarts 1) starts
each again and it rejoins. One run measures

  recovery: the time from each kill to every survivor's next completed step (each kill, and the median);
  rejoin:   when the restarted worker's process starts, joins and takes its first step with the others;
  throughput over time: samples/s of the whole job (every worker's completed steps) through the kills and
            rejoins, committing every --batches-per-commit batches;
  commit costs: the step time with CommitStateCallback(batches_per_commit=N) for each N of
            --commit-settings, against steps with no elastic callback at all ("none"), in segments of the
            same job before the first kill, the order rotated every round.

The job runs benchmarks/workers/elastic_train.py. On the emulated cluster (default) every host is one machine
of a SLURM job: bpslaunch runs there with the environment srun gives one task per node, so it starts that
node's server (BYTEPS_SERVERS_PER_NODE = servers / workers), its worker and, on host 0, the scheduler, and it
starts a lost worker again. --local runs the job on this host's loopback with bpslaunch --local instead.

python -m benchmarks.elastic_recovery --workers 4 --servers 4 --rate 1gbit \\
    --output docs/performance/elastic_recovery_w4_s4_1gbit.json
python -m benchmarks.elastic_recovery --local --workers 2 --servers 1 --kills 1 --segment-steps 10 \\
    --rounds 1 --commit-settings none,1,5 --settle-s 2 --warmup-s 2     # a quick check
"""

import argparse
import json
import math
import os
import secrets
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.lib import netns
from benchmarks.lib.processes import benchmark_env, parse_env_items
from benchmarks.lib.results import describe_machine, save_result
from testing.elastic_jobs import processes_with
from testing.jobs import BPSLAUNCH, REPO_ROOT, free_port

WORKER_MODULE = "benchmarks.workers.elastic_train"
STUCK_S = 5.0  # when no worker completed a step for this long, every worker prints its Python stack


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--servers", type=int, default=4, help="emulated cluster: a multiple of --workers")
    parser.add_argument("--rate", default="1gbit", help="each host's link, each direction (tc syntax)")
    parser.add_argument("--local", action="store_true", help="bpslaunch --local on this host's loopback")
    parser.add_argument("--model", default="mlp-small", help="a model of benchmarks/lib/models.py")
    parser.add_argument("--batch-per-worker", type=int, default=32)
    parser.add_argument("--kills", default="1,2,3,0", help="the workers to kill, in order (each once)")
    parser.add_argument("--min-workers", type=int, help="BYTEPS_MIN_WORKERS (default: workers - 1)")
    parser.add_argument("--batches-per-commit", type=int, default=1, help="while workers are killed")
    parser.add_argument("--commit-settings", default="none,1,10,100")
    parser.add_argument("--segment-steps", type=int, default=100, help="steps of one commit-cost segment")
    parser.add_argument("--rounds", type=int, default=3, help="commit-cost segments of each setting")
    parser.add_argument("--warmup-s", type=float, default=20, help="training with every worker before the first kill")
    parser.add_argument("--settle-s", type=float, default=20,
                        help="training with every worker after a rejoin, before the next kill")
    parser.add_argument("--bin-s", type=float, default=2.0, help="the throughput series' bins")
    parser.add_argument("--timeout", type=float, default=1500, help="the whole job, seconds")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for every process of the job (repeatable)")
    parser.add_argument("--keep-logs", metavar="DIR", help="copy the job's logs and events to DIR")
    parser.add_argument("--from-logs", metavar="DIR", help="analyse the logs kept from a run (same settings)")
    parser.add_argument("--output", help="JSON result file (a PNG of the same name is written beside it)")
    args = parser.parse_args(argv)
    args.env = parse_env_items(args.env)
    args.kills = [int(k) for k in args.kills.split(",") if k != ""]
    if len(set(args.kills)) != len(args.kills) or not all(0 <= k < args.workers for k in args.kills):
        parser.error("--kills: distinct worker ids below --workers (bpslaunch restarts each place once)")
    if args.min_workers is None:
        args.min_workers = max(1, args.workers - 1)
    if not args.local and args.servers % args.workers:
        parser.error("on the emulated cluster every host runs servers / workers servers: use a multiple")
    return args


def worker_argv(args, log_dir):
    return [sys.executable, "-m", WORKER_MODULE, "--log-dir", str(log_dir), "--model", args.model,
            "--batch-per-worker", str(args.batch_per_worker), "--commit-settings", args.commit_settings,
            "--segment-steps", str(args.segment_steps), "--rounds", str(args.rounds),
            "--batches-per-commit", str(args.batches_per_commit)]


def elastic_env(args):
    return {"BYTEPS_MIN_WORKERS": str(args.min_workers), "BYTEPS_MAX_WORKERS": str(args.workers)}


class LocalJob:
    """The job on loopback: one bpslaunch --local."""

    def __init__(self, args, log_dir):
        command = [BPSLAUNCH, "--local", "--workers", str(args.workers), "--servers", str(args.servers),
                   "--min-workers", str(args.min_workers), "--max-workers", str(args.workers), "--max-restarts", "1",
                   "--timeout", str(args.timeout), "--", *worker_argv(args, log_dir)]
        self.command = shlex.join(command)
        self.log_path = Path(log_dir) / "bpslaunch.log"
        with open(self.log_path, "w") as log:
            self.launchers = [subprocess.Popen(command, env=benchmark_env(args.env), stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True)]

    def logs(self):
        return {"bpslaunch": self.log_path.read_text(errors="replace")}

    def close(self):
        for launcher in self.launchers:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()


class ClusterJob:
    """The job on the emulated cluster: on each host, bpslaunch as srun starts it on a node of a SLURM job."""

    def __init__(self, args, cluster, log_dir):
        hosts = cluster.hosts
        common = benchmark_env(dict(args.env, **elastic_env(args)))
        common.update(SLURM_JOB_ID=str(os.getpid()), SLURM_JOB_NODELIST=",".join(cluster.address(h) for h in hosts),
                      SLURM_NTASKS=str(len(hosts)), BYTEPS_SERVERS_PER_NODE=str(args.servers // args.workers),
                      DMLC_PS_ROOT_PORT=str(free_port()), BYTEPS_JOB_SECRET=secrets.token_hex(16))
        argv = [BPSLAUNCH, "--max-restarts", "1", *worker_argv(args, log_dir)]
        self.command = shlex.join(argv)
        self.log_dir = Path(log_dir)
        self.launchers = [cluster.popen(host, argv, dict(common, SLURM_NODEID=str(i), SLURM_PROCID=str(i)),
                                        self.log_dir / f"{host}.log") for i, host in enumerate(hosts)]

    def logs(self):
        return {p.stem: p.read_text(errors="replace") for p in sorted(self.log_dir.glob("n*.log"))}

    def close(self):
        pass  # the cluster kills what runs in it


def network_counters(cluster):
    """What TCP had to retransmit on each host (the kernel's counters of its namespace, fresh with it) and
    what the links' rate limiters dropped: each host's egress and the switch's port towards it."""
    def run(ns, *argv):
        return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=30).stdout

    def dropped(text):
        # `tc -s qdisc show dev X`: "Sent ... (dropped N, overlimits ...)", the root qdisc first
        for line in text.splitlines():
            if "dropped" in line:
                return int(line.split("dropped")[1].split(",")[0])
        return None

    counters = {}
    switch = cluster.namespace("switch")
    for i, host in enumerate(cluster.hosts):
        ns = cluster.namespace(host)
        tables = {}
        for path in ("/proc/net/snmp", "/proc/net/netstat"):
            lines = run(ns, "cat", path).splitlines()
            for names, values in zip(lines[::2], lines[1::2]):
                prefix = names.split(":")[0]
                tables.update({f"{prefix}.{n}": int(v) for n, v in zip(names.split()[1:], values.split()[1:])
                               if v.lstrip("-").isdigit()})
        counters[host] = {"retransmitted_segments": tables.get("Tcp.RetransSegs"),
                          "retransmission_timeouts": tables.get("TcpExt.TCPTimeouts"),
                          "egress_dropped": dropped(run(ns, "tc", "-s", "qdisc", "show", "dev", "eth0")),
                          "switch_port_dropped": dropped(run(switch, "tc", "-s", "qdisc", "show", "dev", f"p{i}"))}
    return counters


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


def steps_of(rows, phase=None):
    return [r for r in rows if r["event"] == "step" and (phase is None or r["phase"] == phase)]


def full_size_step_after(events, worker, after, size, broken):
    """The worker's first step after `after` in a generation of `size` workers later than `broken` (steps of
    the broken generation whose sums were complete before the kill may be logged just after it)."""
    return next((r for r in steps_of(events.get(worker, [])) if r["t"] > after and r["size"] == size
                 and r["gen"] > broken), None)


def run_kills(args, job, log_dir, watch):
    """Kills each worker of --kills in turn; returns the kill times and pids."""
    everyone = range(args.workers)
    watch.until("the recovery phase", lambda ev: all(steps_of(ev.get(w, []), "recovery") for w in everyone))
    start = max(steps_of(read_events(log_dir)[w], "recovery")[0]["t"] for w in everyone)
    print(f"commit-cost segments done; training with {args.workers} workers", flush=True)
    watch.idle(args.warmup_s)
    kills = []
    for target in args.kills:
        pid = worker_pids(log_dir)[target]
        killed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        print(f"killed worker {target} (pid {pid})", flush=True)
        survivors = [w for w in everyone if w != target]
        watch.until(f"the survivors' steps after killing worker {target}",
                    lambda ev: all(any(r["t"] > killed_at for r in steps_of(ev.get(w, []))) for w in survivors))
        back = watch.until(f"worker {target}'s rejoin",
                           lambda ev: full_size_step_after(ev, target, killed_at, args.workers, broken=0))
        print(f"worker {target} rejoined {back['t'] - killed_at:.1f} s after the kill", flush=True)
        kills.append({"worker": target, "pid": pid, "t": killed_at})
        watch.idle(args.settle_s)
    (Path(log_dir) / "stop").touch()
    return start, kills


def wait_for_end(job, deadline):
    for launcher in job.launchers:
        launcher.wait(timeout=max(1, deadline - time.monotonic()))
    return [launcher.returncode for launcher in job.launchers]


# --- analysis ---------------------------------------------------------------------------------------------

def _median(values):
    return statistics.median(values) if values else None


def commit_costs(args, events):
    """Per setting: worker 0's step intervals inside the commit-cost segments (the first step of a segment
    also holds fit's start: left out) and the time its commit callback took at the batches that committed."""
    rows = steps_of(events[0], "commit")
    by_setting = {}
    for previous, row in zip(rows, rows[1:]):
        if row["segment"] != previous["segment"] or row["pid"] != previous["pid"]:
            continue
        entry = by_setting.setdefault(row["setting"], {"intervals": [], "commits": [], "push_pull": []})
        entry["intervals"].append(row["t"] - previous["t"])
        entry["push_pull"].append(row["push_pull_s"] - previous["push_pull_s"])
    for row in rows:
        if row["setting"] != "none" and row["batch"] % int(row["setting"]) == 0:
            by_setting.setdefault(row["setting"], {"intervals": [], "commits": [], "push_pull": []})["commits"].append(
                row["commit_s"])
    none_mean = None
    if "none" in by_setting and by_setting["none"]["intervals"]:
        none_mean = statistics.mean(by_setting["none"]["intervals"])
    costs = []
    for setting in args.commit_settings.split(","):
        entry = by_setting.get(setting, {"intervals": [], "commits": [], "push_pull": []})
        intervals = entry["intervals"]
        mean = statistics.mean(intervals) if intervals else None
        costs.append({
            "setting": setting, "batches_per_commit": None if setting == "none" else int(setting),
            "steps": len(intervals), "mean_step_s": mean, "median_step_s": _median(intervals),
            "commits": len(entry["commits"]), "median_commit_s": _median(entry["commits"]),
            "commit_s_per_step": (_median(entry["commits"]) / int(setting)) if entry["commits"] else 0.0,
            "vs_none": (mean / none_mean - 1) if mean and none_mean else None,
            "mean_push_pull_s": statistics.mean(entry["push_pull"]) if entry["push_pull"] else None,
        })
    return costs


def recovery(args, events, kills):
    """For each kill: every survivor's first completed step in a later generation than the one the kill broke,
    when its reset callback ran (the next generation formed) and when fit began again (the state synchronised
    from rank 0); the restarted process's start, join and first step with every worker."""
    results = []
    for kill in kills:
        at, target = kill["t"], kill["worker"]
        survivors = []
        for worker in range(args.workers):
            if worker == target:
                continue
            before = [r for r in steps_of(events[worker]) if r["t"] <= at]
            broken = before[-1]["gen"]  # the generation the kill broke
            after = [r for r in events[worker] if r["t"] > at]
            step = next(r for r in after if r["event"] == "step" and r["gen"] > broken)
            reset = next((r for r in after if r["event"] == "reset" and r["t"] <= step["t"]), None)
            begin = next((r for r in after if r["event"] == "begin" and reset and reset["t"] <= r["t"] <= step["t"]),
                         None)
            survivors.append({
                "worker": worker, "next_step_s": step["t"] - at, "rank_after": step["rank"],
                "size_after": step["size"], "reset_s": reset["t"] - at if reset else None,
                "synchronised_s": begin["t"] - at if begin else None,
                # steps whose sums were complete before the kill, logged just after it
                "steps_of_broken_generation_after_kill": sum(r["event"] == "step" and r["gen"] == broken
                                                             for r in after),
            })
        own = [r for r in events[target] if r["t"] > at]
        start = next((r for r in own if r["event"] == "start"), None)
        ready = next((r for r in own if r["event"] == "ready"), None)
        first_full = full_size_step_after(events, target, at, args.workers, broken)
        # The survivors' pause when the restarted worker joins: their last step with one worker fewer, then the
        # first with every worker.
        reference = survivors[0]["worker"]
        full = full_size_step_after(events, reference, at, args.workers, broken)
        short = [r for r in steps_of(events[reference]) if at < r["t"] < (full["t"] if full else float("inf"))
                 and r["size"] == args.workers - 1]
        results.append({
            "worker": target, "pid": kill["pid"], "survivors": survivors,
            "median_next_step_s": _median([s["next_step_s"] for s in survivors]),
            "max_next_step_s": max(s["next_step_s"] for s in survivors),
            "restart": {
                "process_started_s": start["t"] - at if start else None,
                "joined_s": ready["t"] - at if ready else None,
                "first_step_s": first_full["t"] - at if first_full else None,
                "rank_after": first_full["rank"] if first_full else None,
                "steps_with_fewer_workers": len(short),
                "join_pause_s": (full["t"] - short[-1]["t"]) if short and full else None,
            },
        })
    return results


def throughput_series(args, events, start, end):
    """Samples/s of the whole job in bins of --bin-s from `start` (time.time) to `end`: every worker's completed
    steps of the recovery phase, each worth --batch-per-worker samples; and the job's size at each bin."""
    steps = sorted((r["t"], r["size"]) for rows in events.values() for r in steps_of(rows, "recovery"))
    count = max(1, math.ceil((end - start) / args.bin_s))
    samples = [0] * count
    sizes = [0] * count
    for t, size in steps:
        index = int((t - start) / args.bin_s)
        if 0 <= index < count:
            samples[index] += args.batch_per_worker
            sizes[index] = max(sizes[index], size)
    return {"bin_s": args.bin_s, "t": [round(i * args.bin_s, 3) for i in range(count)],
            "samples_per_s": [s / args.bin_s for s in samples], "workers": sizes}


def steady_rates(args, events, start, kills):
    """Samples/s with every worker (before the first kill) and with one fewer (between each kill and the
    restarted worker's first step, after the survivors' first step)."""
    steps = sorted((r["t"], r["size"]) for rows in events.values() for r in steps_of(rows, "recovery"))

    def rate(since, until):
        inside = [t for t, _ in steps if since < t <= until]
        return len(inside) * args.batch_per_worker / (until - since) if until > since and inside else None

    full = rate(start, kills[0]["t"]) if kills else None
    fewer = []
    for kill in kills:
        survivors = [s["next_step_s"] for s in kill["survivors"]]
        if kill["restart"]["first_step_s"] is not None and kill["restart"]["join_pause_s"] is not None:
            since = kill["t"] + max(survivors)
            until = kill["t"] + kill["restart"]["first_step_s"] - kill["restart"]["join_pause_s"]
            value = rate(since, until)
            if value:
                fewer.append(value)
    return {"all_workers_samples_per_s": full, "one_fewer_samples_per_s": _median(fewer)}


def analyse(args, events, start, kills, end):
    kills_out = recovery(args, events, kills)
    for kill, raw in zip(kills_out, kills):
        kill["t"] = raw["t"]
    every = [s["next_step_s"] for k in kills_out for s in k["survivors"]]
    ready = next(r for r in events[0] if r["event"] == "ready")
    series = throughput_series(args, events, start, end)
    rates = steady_rates(args, events, start, kills_out)
    for kill in kills_out:
        kill["t"] = round(kill["t"] - start, 3)  # on the series' clock
    return {
        "gradient_bytes": ready["gradient_bytes"],
        "recovery": {"kills": kills_out, "median_next_step_s": _median(every), "max_next_step_s": max(every),
                     "all_next_step_s": every,
                     "median_rejoin_first_step_s": _median([k["restart"]["first_step_s"] for k in kills_out
                                                            if k["restart"]["first_step_s"] is not None]),
                     "median_join_pause_s": _median([k["restart"]["join_pause_s"] for k in kills_out
                                                     if k["restart"]["join_pause_s"] is not None])},
        "throughput": dict(series, **rates),
        "commit_costs": commit_costs(args, events),
    }


# --- tables ---------------------------------------------------------------------------------------------------

def _ms(value):
    return "-" if value is None else f"{value * 1e3:.0f}"


def _s(value):
    return "-" if value is None else f"{value:.2f}"


def recovery_table(result):
    lines = ["| kill -9 of worker | survivors' next step, s (each) | median, s | next generation formed, s | "
             "state synchronised, s | restarted: process up, s | joined, s | first step with all, s | "
             "survivors' pause at the join, s |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for kill in result["recovery"]["kills"]:
        restart = kill["restart"]
        each = ", ".join(f"{s['next_step_s']:.2f}" for s in kill["survivors"])
        resets = [s["reset_s"] for s in kill["survivors"] if s["reset_s"] is not None]
        synced = [s["synchronised_s"] for s in kill["survivors"] if s["synchronised_s"] is not None]
        lines.append(f"| {kill['worker']} | {each} | {_s(kill['median_next_step_s'])} | {_s(_median(resets))} | "
                     f"{_s(_median(synced))} | {_s(restart['process_started_s'])} | {_s(restart['joined_s'])} | "
                     f"{_s(restart['first_step_s'])} | {_s(restart['join_pause_s'])} |")
    r = result["recovery"]
    lines.append(f"| all | median of {len(r['all_next_step_s'])}: {_s(r['median_next_step_s'])}, "
                 f"max {_s(r['max_next_step_s'])} | | | | | | {_s(r['median_rejoin_first_step_s'])} (median) | "
                 f"{_s(r['median_join_pause_s'])} (median) |")
    return "\n".join(lines)


def commit_table(result):
    lines = ["| elastic callbacks | steps timed | mean step, ms | median step, ms | push_pull in flight, ms/step | "
             "one commit, ms (median) | commit per step, ms | mean step against none |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in result["commit_costs"]:
        name = "none" if c["setting"] == "none" else f"batches_per_commit={c['setting']}"
        against = "-" if c["vs_none"] is None or c["setting"] == "none" else f"{c['vs_none'] * 100:+.1f}%"
        lines.append(f"| {name} | {c['steps']} | {_ms(c['mean_step_s'])} | {_ms(c['median_step_s'])} | "
                     f"{_ms(c['mean_push_pull_s'])} | {_ms(c['median_commit_s'])} | "
                     f"{c['commit_s_per_step'] * 1e3:.1f} | {against} |")
    return "\n".join(lines)


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


def main(argv=None):
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bps_tf_elastic_bench_") as scratch:
        log_dir = Path(args.from_logs or scratch)
        run = json.loads((log_dir / "run.json").read_text()) if args.from_logs else run_job(args, log_dir)
        events = read_events(log_dir)
    start = run["start"]
    end = max(r["t"] for rows in events.values() for r in steps_of(rows, "recovery"))
    result = {"benchmark": "elastic_recovery", "network": "loopback" if args.local else "emulated",
              "rate": None if args.local else args.rate, "workers": args.workers, "servers": args.servers,
              "layout": "bpslaunch --local on one host" if args.local else
              "one host per SLURM node, started as srun bpslaunch --max-restarts 1 starts it: its worker and "
              "servers; the scheduler on host 0",
              "model": args.model, "batch_per_worker": args.batch_per_worker, "min_workers": args.min_workers,
              "batches_per_commit": args.batches_per_commit, "kills": args.kills,
              "benchmark_command": shlex.join(["python", "-m", "benchmarks.elastic_recovery",
                                               *(sys.argv[1:] if argv is None else argv)]),
              "job_command": run["job_command"], "product": run["product"], "machine": describe_machine()}
    result.update(analyse(args, events, start, run["kills"], end))
    result["launcher_restarts"] = run["launcher_restarts"]
    result["stalls"] = {"threshold_s": STUCK_S, "after_s": [round(s["after"] - start, 3) for s in run["stalls"]]}
    result["network_counters"] = run["network_counters"]
    print(recovery_table(result))
    print()
    print(commit_table(result))
    tp = result["throughput"]
    print(f"\nsamples/s: {_s(tp['all_workers_samples_per_s'])} with {args.workers} workers, "
          f"{_s(tp['one_fewer_samples_per_s'])} with {args.workers - 1}")
    if result["stalls"]["after_s"]:
        print(f"no worker completed a step for {STUCK_S:g} s or more after {result['stalls']['after_s']} s")
    save_result(args.output, result)
    if args.output:
        from benchmarks.report.elastic_plots import plot_file

        print(f"wrote {args.output} and {plot_file(Path(args.output))}")
    return result


def product_version():
    """The commit measured, and whether the product's code differed from it (bps_tf/, cc/)."""
    def git(*argv):
        done = subprocess.run(["git", *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else None

    changed = git("status", "--porcelain", "--", "bps_tf", "cc")
    return {"commit": git("rev-parse", "HEAD"), "uncommitted_changes": None if changed is None else bool(changed)}


if __name__ == "__main__":
    main()
