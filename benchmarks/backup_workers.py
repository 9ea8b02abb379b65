"""Step time of the workers that are not slowed, with a straggler, synchronous and with a backup worker.

python -m benchmarks.backup_workers --runs 3

4 workers and 1 server on loopback, each step a simulated compute of --compute-ms (a sleep, so that the
straggler's delay is exact on a busy machine) and 8 MB of gradients (workers/backup_steps.py). Straggler
modes: none; the last worker slowed 5x at every step ("persistent"); one worker slowed 5x every 4th step, in
turn ("transient"); with one backup worker also with catch-up (a worker behind the completed rounds skips
its compute and takes their results). Each run goes through every job in turn. Prints a JSON line per
job with the mean step time of the workers that are not persistently slowed, and its ratio to the same run's
job without a straggler.
"""

import argparse
import json
import statistics
import sys

from testing.jobs import REPO_ROOT, run_local

WORKER = REPO_ROOT / "benchmarks" / "workers" / "backup_steps.py"  # absolute: run_local takes it as it is
JOBS = [("none", 0, False), ("persistent", 0, False), ("persistent", 1, False), ("persistent", 1, True),
        ("transient", 0, False), ("transient", 1, False), ("transient", 1, True)]


def job(mode, backups, catch_up, steps, compute_ms):
    done = run_local(WORKER, 4, 1, mode, steps, compute_ms, "catch_up" if catch_up else "compute",
                     BYTEPS_BACKUP_WORKERS=backups)
    if done.returncode != 0:
        sys.exit(f"the job failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    workers = [json.loads(line[line.index("{"):]) for line in done.stdout.splitlines()
               if "{" in line and line.rstrip().endswith("}")]
    others = [w for w in workers if not w["slowed"]]
    return {"mode": mode, "backup_workers": backups, "catch_up": catch_up,
            "step_ms": statistics.mean(w["step_ms"] for w in others),
            "late_pushes": sum(w["late_pushes"] for w in workers)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--compute-ms", type=float, default=50)
    args = parser.parse_args()
    for run in range(args.runs):
        results = [job(mode, backups, catch_up, args.steps, args.compute_ms) for mode, backups, catch_up in JOBS]
        baseline = results[0]["step_ms"]
        for result in results:
            print(json.dumps({"run": run, **result, "ratio_to_no_straggler": result["step_ms"] / baseline}),
                  flush=True)


if __name__ == "__main__":
    main()
