"""push_pull against TensorFlow's RING all-reduce on an emulated cluster (network namespaces, tc-limited
links), with the bounds M/B (push_pull) and 2(N-1)/N*M/B (ring) and the raw TCP goodput of a link.

python -m benchmarks.push_pull_cluster --workers 4 --servers 4 --rate 1gbit \\
    --output docs/performance/cluster_w4_s4_1gbit.json
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.lib import cluster_job
from benchmarks.lib.measure import bounds
from benchmarks.lib.netns import QUEUE, EmulatedCluster
from benchmarks.lib.processes import job_malloc, parse_env_items, with_the_rings_malloc
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.report.tables import push_pull_table

DEFAULT_SIZES = [(4 << 10) << (2 * i) for i in range(9)]  # 4 KB ... 256 MB


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--rate", default="1gbit", help="each host's link, each direction (tc syntax)")
    parser.add_argument("--delay", help="one-way delay per link (needs netem in the kernel)")
    parser.add_argument("--switch-queue", default=QUEUE,
                        help="the switch's buffer per port, as time at the link's rate (tbf latency)")
    parser.add_argument("--colocate", action="store_true", help="server i on worker i's host")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="bytes, comma-separated")
    parser.add_argument("--budget-mb", type=float, default=256, help="bytes timed per size and method")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment for every process; glibc's malloc unless BYTEPS_ALLOCATOR is "
                             "given (the ring runs in the same processes)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--output", help="JSON result file (default: print only)")
    return parser.parse_args()


def main():
    args = parse_args()
    extra = with_the_rings_malloc(parse_env_items(args.env))
    limits = bounds(args.rate, args.workers, args.servers, args.colocate)
    hosts = cluster_job.hosts_for(args.workers, args.servers, args.colocate)
    emulated = EmulatedCluster(hosts, args.rate, args.delay, args.switch_queue)
    with tempfile.TemporaryDirectory() as logs, emulated as cluster:
        receiver = "w1" if args.colocate else "s0"
        limits["tcp_goodput_bytes_s"] = cluster_job.measure_link(cluster, "w0", receiver)
        raw = Path(logs) / "result.json"
        worker_argv = lambda i: [sys.executable, "-m", "benchmarks.workers.push_pull", "--sizes", args.sizes,
                                 "--tf-cluster", cluster_job.tf_cluster(cluster, args.workers),
                                 "--budget-mb", str(args.budget_mb), "--output", str(raw)]
        cluster_job.run_job(cluster, args.workers, args.servers, worker_argv, logs, extra, args.timeout,
                            args.colocate)
        result = json.loads(raw.read_text())
    result.update(benchmark="push_pull", network="emulated", servers=args.servers, colocate=args.colocate,
                  delay=args.delay, switch_queue=args.switch_queue, env=extra, job_malloc=job_malloc(extra),
                  bounds=limits, machine=describe_machine())
    print(f"link {args.rate}: raw TCP goodput {limits['tcp_goodput_bytes_s'] / 1e6:.0f} MB/s "
          f"(nominal {limits['link_bytes_s'] / 1e6:.0f} MB/s)")
    print(push_pull_table(result))
    save_result(args.output, result)


if __name__ == "__main__":
    main()
