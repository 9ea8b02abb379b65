"""Elastic training under failures: Keras 3 `fit` with bps_tf.keras.elastic (the Horovod API) in one elastic
job, whose workers, servers and scheduler the benchmark kills with SIGKILL one after another (--kills
1,2,3,0,s1,s2,sched: workers 1, 2, 3 and 0, then servers 1 and 2, then the scheduler); bpslaunch
(--max-restarts 1) starts each again and it rejoins (the scheduler: the job's processes register again).
One run measures

  recovery: the time from each kill to every survivor's next completed step (each kill, and the median; every
            worker survives a server's loss);
  rejoin:   when the restarted worker's process starts, joins and takes its first step with the others; when
            the restarted server's process starts and the workers' first step with every server again (it
            was taken back), and their pause then;
  throughput over time: samples/s of the whole job (every worker's completed steps) through the kills and
            rejoins, committing every --batches-per-commit batches;
  commit costs: the step time with CommitStateCallback(batches_per_commit=N) for each N of
            --commit-settings, against steps with no elastic callback at all ("none"), in segments of the
            same job before the first kill, the order rotated every round.

The job runs benchmarks/workers/elastic_train.py. On the emulated cluster (default) every host is one machine
of a SLURM job: bpslaunch runs there with the environment srun gives one task per node, so it starts that
node's servers (BYTEPS_SERVERS_PER_NODE = servers / workers; server N is host N's when there are as many
servers as workers), its worker and, on host 0, the scheduler, and it starts a lost worker or server again.
--local runs the job on this host's loopback with bpslaunch --local instead.

Its parts: benchmarks/lib/elastic_launchers.py (the two ways to start the job), elastic_run.py (the kills),
elastic_events.py (the workers' events), elastic_analysis.py (from events to the result);
benchmarks/report/tables.py and elastic_plots.py (its tables and plot).

python -m benchmarks.elastic_recovery --workers 4 --servers 4 --rate 1gbit --kills 1,2,3,0,s1,s2,sched \\
    --output docs/performance/elastic_recovery_w4_s4_1gbit.json
python -m benchmarks.elastic_recovery --local --workers 2 --servers 2 --kills 1,s1,sched --segment-steps 10 \\
    --rounds 1 --commit-settings none,1,5 --settle-s 2 --warmup-s 2     # a quick check
"""

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path

from benchmarks.lib.elastic_analysis import analyse
from benchmarks.lib.elastic_events import read_events, steps_of
from benchmarks.lib.elastic_run import STUCK_S, run_job
from benchmarks.lib.processes import parse_env_items
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.report.tables import elastic_commit_table, elastic_recovery_table, s_cell


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--servers", type=int, default=4, help="emulated cluster: a multiple of --workers")
    parser.add_argument("--rate", default="1gbit", help="each host's link, each direction (tc syntax)")
    parser.add_argument("--local", action="store_true", help="bpslaunch --local on this host's loopback")
    parser.add_argument("--model", default="mlp-small", help="a model of benchmarks/lib/models.py")
    parser.add_argument("--batch-per-worker", type=int, default=32)
    parser.add_argument("--kills", default="1,2,3,0",
                        help="the workers (N), servers (sN) and the scheduler (sched) to kill, in order (each once), "
                             "e.g. 1,2,3,0,s1,s2,sched")
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
    try:
        args.kills = [("scheduler", 0) if k == "sched" else ("server", int(k[1:])) if k.startswith("s")
                      else ("worker", int(k)) for k in args.kills.split(",") if k != ""]
    except ValueError:
        parser.error(f"--kills: worker ids (N), server ids (sN) and sched, comma-separated, not {args.kills!r}")
    counts = {"worker": args.workers, "server": args.servers, "scheduler": 1}
    if len(set(args.kills)) != len(args.kills) or not all(0 <= n < counts[role] for role, n in args.kills):
        parser.error("--kills: distinct worker ids below --workers, sN with server ids below --servers and sched "
                     "(bpslaunch restarts each place once)")
    if args.servers < 2 and any(role == "server" for role, _ in args.kills):
        parser.error("--kills: an elastic job goes on without a lost server only with another: --servers 2 or more")
    if args.min_workers is None:
        args.min_workers = max(1, args.workers - 1)
    if not args.local and args.servers % args.workers:
        parser.error("on the emulated cluster every host runs servers / workers servers: use a multiple")
    return args


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
              "batches_per_commit": args.batches_per_commit,
              "kills": [n if role == "worker" else "sched" if role == "scheduler" else f"s{n}"
                        for role, n in args.kills],
              "benchmark_command": shlex.join(["python", "-m", "benchmarks.elastic_recovery",
                                               *(sys.argv[1:] if argv is None else argv)]),
              "job_command": run["job_command"], "product": run["product"], "machine": describe_machine()}
    result.update(analyse(args, events, start, run["kills"], end))
    result["launcher_restarts"] = run["launcher_restarts"]
    result["stalls"] = {"threshold_s": STUCK_S, "after_s": [round(s["after"] - start, 3) for s in run["stalls"]]}
    result["network_counters"] = run["network_counters"]
    for role in ("worker", "server", "scheduler"):
        if any(role in kill for kill in result["recovery"]["kills"]):
            print(elastic_recovery_table(result, role))
            print()
    print(elastic_commit_table(result))
    tp = result["throughput"]
    print(f"\nsamples/s: {s_cell(tp['all_workers_samples_per_s'])} with {args.workers} workers, "
          f"{s_cell(tp['one_fewer_samples_per_s'])} with {args.workers - 1}")
    if result["stalls"]["after_s"]:
        print(f"no worker completed a step for {STUCK_S:g} s or more after {result['stalls']['after_s']} s")
    save_result(args.output, result)
    if args.output:
        from benchmarks.report.elastic_plots import plot_file

        print(f"wrote {args.output} and {plot_file(Path(args.output))}")
    return result


if __name__ == "__main__":
    main()
