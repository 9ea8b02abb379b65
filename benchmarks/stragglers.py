"""Time to accuracy with a straggler, for each training mode: synchronous, backup workers (b = 1), bounded
staleness (s = 2) and asynchronous, on an emulated cluster. Keras 3 `fit` under BytePSStrategy of the digits
MLP (benchmarks/workers/accuracy.py) until a target test accuracy, with no straggler and with the last
worker slowed 2x and 5x: from its second step on, its CPU share capped (a cgroup's CPU quota) at 1/2 and 1/5
of the CPU its process used after its first step in the same mode's run without a straggler. Reports each
run's time to the target and step time (of worker 0, never slowed, and of the straggler), the ratios to
synchronous training with the same straggler and to the same mode without one, and plots accuracy over
training time.

python -m benchmarks.stragglers --workers 4 --servers 4 --rate 1gbit --slowdowns 1,2,5 \\
    --output docs/performance/stragglers_w4_s4_1gbit.json
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from benchmarks.lib import cluster_job
from benchmarks.lib.cpu_quota import CpuQuota
from benchmarks.lib.netns import EmulatedCluster
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.report.tables import stragglers_table

MODES = {"sync": {}, "backup": {"BYTEPS_BACKUP_WORKERS": "1"}, "staleness": {"BYTEPS_STALENESS": "2"},
         "async": {"BYTEPS_ENABLE_ASYNC": "1"}}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--rate", default="1gbit", help="each host's link, each direction (tc syntax)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--slowdowns", default="1,2,5", help="the straggler's CPU share divided by each; 1: none")
    parser.add_argument("--target", type=float, default=0.96)
    parser.add_argument("--max-epochs", type=int, default=30)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--output")
    return parser.parse_args()


def run(cluster, args, mode, quota_cores, timeout=1800):
    """One job; the last worker's process runs under a CPU quota of `quota_cores` (None: no cap)."""
    straggler = args.workers - 1
    with tempfile.TemporaryDirectory() as logs, CpuQuota(quota_cores) as quota:
        out = str(Path(logs) / "result.json")

        def argv(i):
            command = [sys.executable, "-m", "benchmarks.workers.accuracy", "--strategy", "bps",
                       "--workers", str(args.workers), "--target", str(args.target),
                       "--max-epochs", str(args.max_epochs), "--learning-rate", str(args.learning_rate),
                       "--output", out]
            return quota.wrap(command) if i == straggler else command

        cluster_job.run_job(cluster, args.workers, args.servers, argv, logs, MODES[mode], timeout)
        first = json.loads(Path(out).read_text())
        slowed = json.loads(Path(f"{out}.worker{straggler}").read_text())
    return {"mode": mode, "quota_cores": quota_cores, "curve": first["curve"], "reached": first["reached"],
            "step_ms": first["train_s"] / first["steps"] * 1e3,
            "straggler_step_ms": slowed["train_s"] / slowed["steps"] * 1e3,
            "straggler_cpu_cores": slowed["steady_cpu_cores"]}


def main():
    args = parse_args()
    slowdowns = [float(s) for s in args.slowdowns.split(",")]
    if slowdowns[0] != 1 or any(s < 1 for s in slowdowns):
        sys.exit("--slowdowns: start with 1 (the run without a straggler, which calibrates the quota); each >= 1")
    runs = []
    with EmulatedCluster(cluster_job.hosts_for(args.workers, args.servers), args.rate) as cluster:
        for mode in args.modes.split(","):
            uncapped = None
            for slowdown in slowdowns:
                quota = None if slowdown == 1 else uncapped["straggler_cpu_cores"] / slowdown
                result = dict(run(cluster, args, mode, quota), slowdown=slowdown)
                uncapped = uncapped or result
                reached = result["reached"]
                outcome = (f"{reached['accuracy']:.3f} after {reached['train_s']:.1f} s" if reached
                           else "target not reached")
                print(f"{mode}, straggler {slowdown:g}x: {outcome}, step {result['step_ms']:.0f} ms, "
                      f"straggler's {result['straggler_step_ms']:.0f} ms", flush=True)
                runs.append(result)
    result = {"benchmark": "stragglers", "rate": args.rate, "workers": args.workers, "servers": args.servers,
              "target": args.target, "learning_rate": args.learning_rate, "runs": runs,
              "machine": describe_machine()}
    print(stragglers_table(result))
    save_result(args.output, result)


if __name__ == "__main__":
    os.environ.pop("TF_USE_LEGACY_KERAS", None)  # Keras 3: its fit catches up with backup workers
    main()
