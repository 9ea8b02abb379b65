"""push_pull against TensorFlow's RING all-reduce on loopback: `bpslaunch --local` jobs on this host.

python -m benchmarks.push_pull_loopback --workers 2 --servers 1 --output docs/performance/loopback_w2_s1.json

Each side runs as its users run it: TF's ring in a job of its own with glibc's malloc (jemalloc, which
bpslaunch preloads, makes the ring slower: 16 MB on loopback 46-53 ms against 22-26), then bps_tf in a job
with bpslaunch's default malloc (jemalloc where installed, whose large blocks a server on the host reads and
writes in place). `--env BYTEPS_ALLOCATOR=...` gives both jobs that malloc.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.lib.processes import benchmark_env, job_malloc, parse_env_items, with_the_rings_malloc
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.report.tables import push_pull_table
from testing.jobs import BPSLAUNCH, REPO_ROOT, free_ports

DEFAULT_SIZES = [(4 << 10) << (2 * i) for i in range(9)]  # 4 KB, 16 KB, ... 256 MB


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="bytes, comma-separated")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--budget-mb", type=float, default=512, help="bytes timed per size and method")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment for every process (e.g. BYTEPS_PARTITION_BYTES=1024000); "
                             "BYTEPS_ALLOCATOR sets both jobs' malloc")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before the whole job is stopped")
    parser.add_argument("--output", help="JSON result file (default: print only)")
    return parser.parse_args()


def run_job(args, methods, extra):
    """One job's result (benchmarks.workers.push_pull measuring `methods`)."""
    cluster = ",".join(f"127.0.0.1:{p}" for p in free_ports(args.workers))
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "result.json"
        command = [BPSLAUNCH, "--local", "--workers", str(args.workers), "--servers", str(args.servers),
                   "--timeout", str(args.timeout), "--", sys.executable, "-m", "benchmarks.workers.push_pull",
                   "--sizes", args.sizes, "--tf-cluster", cluster, "--budget-mb", str(args.budget_mb),
                   "--dtype", args.dtype, "--methods", methods, "--output", str(raw)]
        subprocess.run(command, env=benchmark_env(extra), cwd=REPO_ROOT, check=True, timeout=args.timeout + 30)
        return json.loads(raw.read_text())


def main():
    args = parse_args()
    settings = parse_env_items(args.env)
    ring_env = with_the_rings_malloc(settings)
    ring = run_job(args, "ring", ring_env)
    result = run_job(args, "bps", settings)
    for ours, theirs in zip(result["results"], ring["results"]):
        ours["tf_ring"] = theirs["tf_ring"]
    result.update(benchmark="push_pull", network="loopback", servers=args.servers, env=settings,
                  job_malloc=job_malloc(settings), ring_env=ring_env, ring_malloc=job_malloc(ring_env),
                  machine=describe_machine())
    print(push_pull_table(result))
    save_result(args.output, result)


if __name__ == "__main__":
    main()
