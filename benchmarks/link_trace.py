"""What one worker's link carries over time while it push_pulls: bytes sent and received by the worker
host every 10 ms (its namespace's eth0 counters), for 1 worker and 1 server on an emulated cluster.
A link used well sends and receives at the same time (push of one partition while the sum of an earlier
one comes back); the output shows whether it does.

python -m benchmarks.link_trace --rate 1gbit --bytes 67108864 --output docs/performance/link_trace_1gbit.json
"""

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.lib import cluster_job
from benchmarks.lib.netns import EmulatedCluster

INTERVAL_S = 0.01


def read_counters(pid):
    """(received, sent) bytes of eth0 in the namespace of process `pid`."""
    with open(f"/proc/{pid}/net/dev") as dev:
        for line in dev:
            if line.strip().startswith("eth0:"):
                fields = line.split(":", 1)[1].split()
                return int(fields[0]), int(fields[8])
    raise RuntimeError("no eth0")


def sample(pid, stop, samples):
    while not stop.is_set():
        samples.append((time.perf_counter(), *read_counters(pid)))
        time.sleep(INTERVAL_S)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", default="1gbit")
    parser.add_argument("--bytes", type=int, default=64 << 20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--output")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    samples, stop = [], threading.Event()
    with tempfile.TemporaryDirectory() as logs, EmulatedCluster(cluster_job.hosts_for(1, 1), args.rate) as cluster:
        # A process that lives in the worker's namespace, whose /proc/PID/net/dev shows that namespace.
        witness = cluster.popen("w0", ["sleep", "600"], None, Path(logs) / "witness.log")
        time.sleep(0.2)
        sampler = threading.Thread(target=sample, args=(witness.pid, stop, samples))
        sampler.start()
        try:
            argv = lambda i: [sys.executable, "-m", "benchmarks.workers.numpy_push_pull", str(args.bytes),
                              str(args.rounds)]
            cluster_job.run_job(cluster, 1, 1, argv, logs, extra, timeout=300)
        finally:
            stop.set()
            sampler.join()
    rows = [{"t_s": b[0] - samples[0][0], "received_mb_s": (b[1] - a[1]) / (b[0] - a[0]) / 1e6,
             "sent_mb_s": (b[2] - a[2]) / (b[0] - a[0]) / 1e6} for a, b in zip(samples, samples[1:])]
    busy = [r for r in rows if r["received_mb_s"] > 5 or r["sent_mb_s"] > 5]
    both = [r for r in busy if r["received_mb_s"] > 5 and r["sent_mb_s"] > 5]
    print(f"{len(busy)} busy intervals of {INTERVAL_S * 1e3:.0f} ms; sending and receiving at once in {len(both)}")
    for r in busy[:60]:
        print(f"{r['t_s']:7.3f} s  sent {r['sent_mb_s']:5.0f} MB/s  received {r['received_mb_s']:5.0f} MB/s")
    if args.output:
        Path(args.output).write_text(json.dumps({"benchmark": "link_trace", "rate": args.rate, "bytes": args.bytes,
                                                 "env": extra, "busy_intervals": len(busy),
                                                 "duplex_intervals": len(both), "samples": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
