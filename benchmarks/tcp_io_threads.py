"""What the kernel's TCP costs per byte, and a server's throughput with 1 and more TCP I/O threads, same run.

python -m benchmarks.tcp_io_threads --runs 3 [--threads 1,2,4] [--workers 4]

The kernel's cost: cc/tools/tcp_floor (benchmarks/message_cost.py builds it) moving --floor-bytes requests on
loopback, one at a time, each answered by 96 bytes: CPU of both processes per byte moved (the sender's and the
receiver's system calls, copies and TCP together), and its inverse, bytes per CPU-second.

The server: --workers workers and 1 server on loopback over bps_tf's TCP transport (BYTEPS_SHARED_MEMORY=0,
so every byte crosses a socket), each worker push_pulling a float32 tensor of --bytes bytes --rounds times
(workers/server_throughput.py, which checks every sum). The server receives each worker's pushes and sends
each the sum: server throughput = 2 x the bytes all workers pushed / the slowest worker's seconds. Each run
tries every --threads value of BYTEPS_TCP_IO_THREADS in turn (each run in another order, so that a change
of the machine's load favours none) and prints its throughput against the first's, that run's ratio; the
last line has the medians. On a machine with fewer cores than the job has busy threads, the I/O threads share the
cores with the workers and the server's summing: the ratios show what more threads buy there, not what
they buy on a server with cores to spare.
"""

import argparse
import json
import statistics
import subprocess
import sys

from benchmarks.lib.results import describe_machine, save_result
from benchmarks.message_cost import build_floor
from testing.jobs import REPO_ROOT, run_local

WORKER = REPO_ROOT / "benchmarks" / "workers" / "server_throughput.py"  # absolute: run_local takes it as it is


def kernel_cost(binary, nbytes, messages):
    done = subprocess.run([str(binary), "--bytes", str(nbytes), "--messages", str(messages), "--warmup", "20"],
                          capture_output=True, text=True, timeout=600, check=True)
    floor = json.loads(done.stdout.strip().splitlines()[-1])
    cpu_s = floor["client_cpu_s"] + floor["server_cpu_s"]
    moved = floor["messages"] * (floor["bytes"] + floor["reply_bytes"])
    return {"kernel_tcp": {"bytes": nbytes, "messages": messages, "cpu_s": round(cpu_s, 4),
                           "wall_s": round(floor["wall_s"], 4), "cpu_ns_per_byte": round(cpu_s / moved * 1e9, 4),
                           "bytes_per_cpu_s": round(moved / cpu_s), "bytes_per_wall_s": round(moved / floor["wall_s"])}}


def server_throughput(workers, nbytes, rounds, threads):
    done = run_local(WORKER, workers, 1, nbytes, rounds, BYTEPS_SHARED_MEMORY=0, BYTEPS_TCP_IO_THREADS=threads)
    if done.returncode != 0:
        sys.exit(f"the job failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    results = [json.loads(line[line.index("{"):]) for line in done.stdout.splitlines()
               if "{" in line and line.rstrip().endswith("}")]
    if len(results) != workers:
        sys.exit(f"expected {workers} results, got {len(results)}:\n{done.stdout[-3000:]}")
    seconds = max(r["seconds"] for r in results)
    return 2 * sum(r["bytes_pushed"] for r in results) / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", default="1,2,4", help="BYTEPS_TCP_IO_THREADS values, the first the reference")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--bytes", type=int, default=64 << 20, help="each worker's tensor")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--floor-bytes", type=int, default=4 << 20)
    parser.add_argument("--floor-messages", type=int, default=1000)
    parser.add_argument("--floor-binary", help="a built tcp_floor (default: bazel build //cc/tools:tcp_floor)")
    parser.add_argument("--output", help="JSON result file (default: print only)")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    binary = args.floor_binary or build_floor()
    result = {"benchmark": "tcp_io_threads", "machine": describe_machine(), "workers": args.workers,
              "bytes": args.bytes, "rounds": args.rounds, "runs": []}
    for run in range(args.runs):
        measured = {"run": run, **kernel_cost(binary, args.floor_bytes, args.floor_messages), "server": {}}
        for count in threads[run % len(threads):] + threads[:run % len(threads)]:  # each run another order
            measured["server"][count] = {"bytes_per_s": round(server_throughput(args.workers, args.bytes,
                                                                                args.rounds, count))}
        reference = measured["server"][threads[0]]["bytes_per_s"]
        for count in threads:
            measured["server"][count]["ratio"] = round(measured["server"][count]["bytes_per_s"] / reference, 3)
        print(json.dumps(measured), flush=True)
        result["runs"].append(measured)
    result["median"] = {
        "kernel_tcp_cpu_ns_per_byte": statistics.median(r["kernel_tcp"]["cpu_ns_per_byte"] for r in result["runs"]),
        "server_ratio": {count: statistics.median(r["server"][count]["ratio"] for r in result["runs"])
                         for count in threads}}
    print(json.dumps({"median": result["median"]}), flush=True)
    save_result(args.output, result)


if __name__ == "__main__":
    main()
