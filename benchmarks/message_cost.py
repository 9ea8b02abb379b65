"""What a message costs in CPU: a bps_tf server and a whole bps_tf job against the raw TCP floor, same run.

python -m benchmarks.message_cost [--profile] --output docs/performance/message_cost.json

The floor: cc/tools/tcp_floor (built with Bazel here), a blocking request/response client and server on
loopback, each its own process (its CPU from CLOCK_PROCESS_CPUTIME_ID), a request of SIZE bytes answered by a
96-byte reply as a push is, one request at a time and --tensors in flight. The job: scheduler, 1 server,
1 worker on loopback over bps_tf's TCP transport with shared memory off (BYTEPS_SHARED_MEMORY=0;
BYTEPS_FORCE_DISTRIBUTED=1 makes a single worker push; BYTEPS_FUSION=0 keeps every push a message of its
own), the worker push_pulling --tensors float32 tensors of SIZE bytes at once, over and over, through
bps_tf's NumPy API (benchmarks/workers/message_cost.py). Every process's CPU is read before and after each timed loop while the job waits: its threads' run time in
nanoseconds (/proc/PID/task/*/schedstat), and as a check user + system time in clock ticks (/proc/PID/stat,
"cpu_ticks_s"). "others_cpu_s" is the CPU the rest of the machine used meanwhile (/proc/stat): how quiet the
measurement was.

What is counted: a push_pull of one tensor of up to a partition (4,096,000 bytes) on one host is one PUSH frame
(header and SIZE bytes of payload) from the worker and one PULL_REPLY frame (header only: the sum of a single
worker is its own push, an echo) from the server, nothing else; heartbeats go only on idle connections. The
worker's counters must show SIZE bytes pushed per push_pull, or the run fails. So a push_pull is one exchange,
as one request and reply of the floor is, and has two message ends (worker and server):
  server CPU per message = server CPU / push_pulls;
  job CPU per message end = (scheduler + server + worker CPU) / (2 x push_pulls);
  floor CPU per message end = (client + server CPU) / (2 x requests).
The floor of a size is the cheaper of its two runs (one at a time, --tensors in flight); ratios are against it,
each round's ratios from that round's measurements; each figure's best (least CPU) and spread over --rounds.
Every measured process runs at niceness --nice (-20 by default, as root): the scheduler then gives it nearly
a whole core against other load, which otherwise changes how its threads take turns and so its CPU per
message (either way: preempted threads find more messages waiting).
The job's processes run with the malloc bpslaunch preloads (bps_tf/launcher/allocator.py: jemalloc where
installed); --allocator system measures them with glibc's.
One JSON line per measurement on stdout, then a table; --output writes everything.
"""

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from benchmarks.lib.perf_profile import Recording, top_symbols
from benchmarks.lib.process_cpu import TICK_S, machine_busy_s, tree_context_switches, tree_cpu_s, tree_ticks_s
from benchmarks.lib.processes import benchmark_env, preloaded_malloc
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.report.tables import human_bytes, markdown
from bps_tf.launcher import allocator
from testing.jobs import BPSLAUNCH, REPO_ROOT, free_port, kill_process_groups

FLOOR_TARGET = "//cc/tools:tcp_floor"
REPLY_BYTES = 96  # about a PULL_REPLY's header (cc/ps/message.h) with its frame prefix
COUNTED = ("a push_pull of one tensor is one exchange: a PUSH frame (header + payload) to the server and a "
           "PULL_REPLY frame (header only, the echo of a single worker's push) back; server CPU per message = "
           "server CPU / push_pulls; job CPU per message end = all processes' CPU / (2 x push_pulls); floor CPU "
           "per message end = (client + server CPU) / (2 x requests)")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4096,262144", help="message payload bytes, comma-separated")
    parser.add_argument("--tensors", type=int, default=64, help="push_pulls in flight at once (and the floor's)")
    parser.add_argument("--messages", type=int, default=96000, help="timed push_pulls per size and round")
    parser.add_argument("--budget-mb", type=float, default=4096,
                        help="at most this many MB pushed per size and round (fewer messages for large sizes)")
    parser.add_argument("--rounds", type=int, default=3, help="floor and job measured this many times, in turn")
    parser.add_argument("--profile", action="store_true",
                        help="then one more loop per size under `perf record -g` on one process (--profile-role): "
                             "its top symbols")
    parser.add_argument("--profile-role", choices=("server", "worker"), default="server",
                        help="the process --profile records (default: the server)")
    parser.add_argument("--nice", type=int, default=-20,
                        help="the niceness every measured process runs at (default -20, the most CPU share a "
                             "process can get from the scheduler, so that other load disturbs it less; needs "
                             "root, and is left as it is without)")
    parser.add_argument("--floor-binary", help="a built tcp_floor (default: bazel build " + FLOOR_TARGET + ")")
    parser.add_argument("--allocator", help="BYTEPS_ALLOCATOR for the job's processes (jemalloc, system or a "
                                            "library's path; default: bpslaunch's choice, jemalloc where installed); "
                                            "the floor, which allocates nothing per message, runs as it is")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before everything is stopped")
    parser.add_argument("--output", help="JSON result file (default: print only)")
    return parser.parse_args()


def build_floor():
    """Builds the floor with the flags `make build` uses (so Bazel keeps its analysis), returns its path."""
    python = REPO_ROOT / ".venv" / "bin" / "python"
    flags = [f"--repo_env=PYTHON_BIN_PATH={python if python.exists() else sys.executable}",
             f"--disk_cache={Path.home() / '.cache' / 'bps_tf' / 'bazel-disk'}"]
    built = subprocess.run(["bazel", "build", *flags, FLOOR_TARGET], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=600)
    if built.returncode != 0:
        raise SystemExit(f"bazel build {FLOOR_TARGET} failed (or pass --floor-binary):\n{built.stderr[-3000:]}")
    return REPO_ROOT / "bazel-bin" / "cc" / "tools" / "tcp_floor"


def emit(record):
    print(json.dumps(record), flush=True)
    return record


def run_floor(binary, nbytes, messages, in_flight):
    busy = machine_busy_s()
    done = subprocess.run([str(binary), "--bytes", str(nbytes), "--reply-bytes", str(REPLY_BYTES), "--messages",
                           str(messages), "--warmup", str(min(messages, 2000)), "--in-flight", str(in_flight)],
                          capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # What else ran meanwhile (the warm-up included, so roughly): a quiet machine's is near 0.
    result["others_cpu_s"] = machine_busy_s() - busy - result["client_cpu_s"] - result["server_cpu_s"]
    return result


class Job:
    """Scheduler and server started through bpslaunch (the role runs in that process), the worker started
    directly with pipes to its stdin and stdout; every process killed on exit."""

    def __init__(self, tensors, phases, logs, allocator_choice=None):
        base = dict(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=free_port(), DMLC_NUM_WORKER=1,
                    DMLC_NUM_SERVER=1, DMLC_NODE_HOST="127.0.0.1", BYTEPS_JOB_SECRET=secrets.token_hex(16),
                    BYTEPS_SHARED_MEMORY=0, BYTEPS_FORCE_DISTRIBUTED=1, BYTEPS_FUSION=0)
        if allocator_choice:
            base["BYTEPS_ALLOCATOR"] = allocator_choice
        self.logs = Path(logs)
        self.processes = {}
        self.stopped = ""  # why the job was killed before its end, if it was
        self.files = {role: open(self.logs / f"{role}.log", "w") for role in ("scheduler", "server", "worker")}
        for role in ("scheduler", "server"):
            self.processes[role] = subprocess.Popen(
                [BPSLAUNCH], env=benchmark_env(dict(base, DMLC_ROLE=role)), cwd=REPO_ROOT,
                stdout=self.files[role], stderr=subprocess.STDOUT, start_new_session=True)
        # (The scheduler and server preload bpslaunch's malloc themselves; the worker, started here, the same.)
        worker_env = allocator.apply(benchmark_env(dict(base, DMLC_ROLE="worker", DMLC_WORKER_ID=0)))
        self.worker_malloc = preloaded_malloc(worker_env)
        self.processes["worker"] = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.workers.message_cost", "--tensors", str(tensors), "--phases",
             ",".join(f"{n}:{r}" for n, r in phases)],
            env=worker_env,
            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.files["worker"], text=True,
            start_new_session=True)

    def pid(self, role):
        return self.processes[role].pid

    def cpu_s(self):
        """{role: CPU seconds (threads' run time)}, {role: CPU seconds (clock ticks)},
        {role: (voluntary, involuntary) context switches}."""
        return ({role: tree_cpu_s(p.pid) for role, p in self.processes.items()},
                {role: tree_ticks_s(p.pid) for role, p in self.processes.items()},
                {role: tree_context_switches(p.pid) for role, p in self.processes.items()})

    def expect(self, word):
        """The worker's next line that starts with `word` (its other output goes to its log)."""
        worker = self.processes["worker"]
        while True:
            line = worker.stdout.readline()
            if not line:
                raise RuntimeError(f"the worker ended (exit {worker.wait()}) before '{word}'{self.stopped}:\n"
                                   f"{self.tails()}")
            if line.startswith(word + " "):
                return line.rstrip("\n").split(" ", 2)

    def go(self):
        try:
            self.processes["worker"].stdin.write("go\n")
            self.processes["worker"].stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"the worker ended{self.stopped}:\n{self.tails()}") from None

    def tails(self):
        return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-2000:]}" for p in self.logs.glob("*.log"))

    def finish(self, timeout=60):
        self.processes["worker"].stdin.close()
        code = self.processes["worker"].wait(timeout=timeout)
        if code != 0:
            raise RuntimeError(f"the worker exited {code}:\n{self.tails()}")

    def kill(self):
        """Kills every process (also from another thread: a read of the worker's output then ends)."""
        kill_process_groups(self.processes.values())

    def stop(self, why):
        self.stopped = f" ({why})"
        self.kill()

    def close(self):
        self.kill()
        for file in self.files.values():
            file.close()


def job_phase(job, nbytes, pushes, tensors, profile_to=None, profile_role="server"):
    """One timed loop of the job (its worker waiting at `ready`); each process's CPU over it, per push_pull and
    per message end. With `profile_to`, the loop runs under perf record of `profile_role`'s process."""
    before, ticks_before, switches_before = job.cpu_s()
    busy = machine_busy_s()
    if profile_to:
        with Recording(job.pid(profile_role), profile_to):
            job.go()
            _, _, report = job.expect("done")
    else:
        job.go()
        _, _, report = job.expect("done")
    busy = machine_busy_s() - busy
    after, ticks_after, switches_after = job.cpu_s()
    job.go()  # on to the next phase (or the end)
    report = json.loads(report)
    pushed = report["counters"]["bytes_pushed"]
    if pushed != pushes * nbytes:
        raise RuntimeError(f"the worker pushed {pushed} bytes, not {pushes} x {nbytes}: a push_pull is not one "
                           "PUSH of its whole payload here, so the messages counted are wrong")
    cpu = {role: after[role] - before[role] for role in after}
    job_cpu = sum(cpu.values())
    return {"bytes": nbytes, "tensors": tensors, "push_pulls": pushes, "wall_s": report["wall_s"],
            "bytes_pulled": report["counters"]["bytes_pulled"], "cpu_s": cpu,
            "cpu_ticks_s": {role: ticks_after[role] - ticks_before[role] for role in after},
            "others_cpu_s": busy - job_cpu,  # what else ran on the machine meanwhile: a quiet one's is near 0
            # How often the server's threads went to sleep and were woken, and were preempted, per message: the
            # fewer wake-ups, the more messages each handles at once.
            "server_sleeps_per_message": (switches_after["server"][0] - switches_before["server"][0]) / pushes,
            "server_preemptions_per_message": (switches_after["server"][1] - switches_before["server"][1]) / pushes,
            # The worker's, per push_pull: its transport thread sleeping between pushes, its threads waiting for
            # replies.
            "worker_sleeps_per_push_pull": (switches_after["worker"][0] - switches_before["worker"][0]) / pushes,
            "server_cpu_us_per_message": cpu["server"] / pushes * 1e6,
            "worker_cpu_us_per_message": cpu["worker"] / pushes * 1e6,
            "job_cpu_us_per_push_pull": job_cpu / pushes * 1e6,
            "job_cpu_us_per_message_end": job_cpu / (2 * pushes) * 1e6}


def spread(values):
    return {"best": min(values), "median": statistics.median(values), "worst": max(values)}


def summarise(sizes, rounds):
    """Per size: each figure's best, median and worst over the rounds; ratios from each round's own figures."""
    summary = []
    for nbytes in sizes:
        mine = [r for r in rounds if r["bytes"] == nbytes]
        floors = [min(r["floor"]["one_at_a_time"]["cpu_us_per_message_end"],
                      r["floor"]["in_flight"]["cpu_us_per_message_end"]) for r in mine]
        summary.append({
            "bytes": nbytes,
            "floor_cpu_us_per_message_end": spread(floors),
            "floor_one_at_a_time_us": spread([r["floor"]["one_at_a_time"]["cpu_us_per_message_end"] for r in mine]),
            "floor_in_flight_us": spread([r["floor"]["in_flight"]["cpu_us_per_message_end"] for r in mine]),
            "server_cpu_us_per_message": spread([r["job"]["server_cpu_us_per_message"] for r in mine]),
            "worker_cpu_us_per_message": spread([r["job"]["worker_cpu_us_per_message"] for r in mine]),
            "job_cpu_us_per_message_end": spread([r["job"]["job_cpu_us_per_message_end"] for r in mine]),
            "server_over_floor": spread([r["job"]["server_cpu_us_per_message"] / f for r, f in zip(mine, floors)]),
            "job_over_floor": spread([r["job"]["job_cpu_us_per_message_end"] / f for r, f in zip(mine, floors)]),
            "others_cpu_s_during_job": spread([r["job"]["others_cpu_s"] for r in mine]),
            "server_sleeps_per_message": spread([r["job"]["server_sleeps_per_message"] for r in mine]),
            "worker_sleeps_per_push_pull": spread([r["job"]["worker_sleeps_per_push_pull"] for r in mine]),
        })
    return summary


def table(summary, tensors):
    def cell(s, digits=1):
        return f"{s['best']:.{digits}f} ({s['median']:.{digits}f}-{s['worst']:.{digits}f})" if s["best"] != s[
            "worst"] else f"{s['best']:.{digits}f}"

    rows = [[human_bytes(s["bytes"]), cell(s["floor_one_at_a_time_us"]), cell(s["floor_in_flight_us"]),
             cell(s["server_cpu_us_per_message"]), cell(s["job_cpu_us_per_message_end"]),
             cell(s["server_over_floor"], 2), cell(s["job_over_floor"], 2), cell(s["server_sleeps_per_message"], 2),
             cell(s["worker_sleeps_per_push_pull"], 2)]
            for s in summary]
    header = ["size", "floor, 1 at a time: us/end", f"floor, {tensors} in flight: us/end", "server: us/message",
              "job: us/end", "server / floor", "job / floor", "server: sleeps/message",
              "worker: sleeps/push_pull"]
    quiet = ", ".join(f"{human_bytes(s['bytes'])} {s['others_cpu_s_during_job']['best']:.2f}-"
                      f"{s['others_cpu_s_during_job']['worst']:.2f} s" for s in summary)
    return (markdown(header, rows) + "\nbest (median-worst) over the rounds; floor: the cheaper of its two runs; "
            f"CPU of other processes during the job's loops: {quiet}")


def profile_table(profiles):
    lines = []
    for p in profiles:
        lines.append(f"\n{p['role']}, {human_bytes(p['bytes'])} ({p['samples']} samples): " + ", ".join(
            f"{k} {v:.1f}%" for k, v in p["concerns"].items()))
        lines += [f"  {row['percent']:5.1f}%  {row['symbol']}  ({row['dso']}; {row['concern']})"
                  for row in p["top"][:12]]
    return "\n".join(lines)


def take_priority(niceness):
    """Sets this process's niceness, which every process it starts inherits; returns the niceness it has."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    except PermissionError:
        print(f"cannot run at niceness {niceness} (not root): measuring at {os.getpriority(os.PRIO_PROCESS, 0)}",
              file=sys.stderr)
    return os.getpriority(os.PRIO_PROCESS, 0)


def messages_for(nbytes, args):
    """Timed push_pulls of a size: --messages, fewer where --budget-mb says, a whole number of rounds."""
    count = min(args.messages, int(args.budget_mb * (1 << 20)) // nbytes)
    return max(1, count // args.tensors) * args.tensors


def main():
    args = parse_args()
    if args.profile and not shutil.which("perf"):
        raise SystemExit("--profile needs perf (Debian: apt-get install linux-perf)")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    try:
        allocator.library(dict(BYTEPS_ALLOCATOR=args.allocator or ""))
    except ValueError as error:
        raise SystemExit(f"--allocator: {error}") from None
    binary = Path(args.floor_binary) if args.floor_binary else build_floor()
    if not binary.is_file():
        raise SystemExit(f"no floor program at {binary}: build it with bazel build {FLOOR_TARGET}")
    niceness = take_priority(args.nice)
    counts = {n: messages_for(n, args) for n in sizes}
    phases = [(n, counts[n] // args.tensors) for _ in range(args.rounds) for n in sizes]
    if args.profile:
        phases += [(n, counts[n] // args.tensors) for n in sizes]
    rounds, profiles = [], []
    with tempfile.TemporaryDirectory(prefix="message_cost_") as tmp:
        job = Job(args.tensors, phases, tmp, args.allocator)
        watchdog = threading.Timer(args.timeout, job.stop, [f"stopped after --timeout {args.timeout} s"])
        watchdog.start()
        try:
            for index in range(args.rounds):
                for nbytes in sizes:
                    job.expect("ready")  # the floor runs while the job waits
                    floor = {"one_at_a_time": emit(dict(run_floor(binary, nbytes, counts[nbytes], 1),
                                                        kind="floor", round=index)),
                             "in_flight": emit(dict(run_floor(binary, nbytes, counts[nbytes], args.tensors),
                                                    kind="floor", round=index))}
                    measured = emit(dict(job_phase(job, nbytes, counts[nbytes], args.tensors), kind="job",
                                         round=index))
                    rounds.append({"round": index, "bytes": nbytes, "floor": floor, "job": measured})
            for nbytes in sizes if args.profile else ():
                role = args.profile_role
                data = Path(tmp) / f"{role}_{nbytes}.perf"
                job.expect("ready")
                measured = job_phase(job, nbytes, counts[nbytes], args.tensors, profile_to=data, profile_role=role)
                top, concerns, samples = top_symbols(data, job.pid(role))
                profiles.append(emit({"kind": "profile", "role": role, "bytes": nbytes, "samples": samples,
                                      "concerns": concerns, "top": top,
                                      f"{role}_cpu_us_per_message_profiled": measured[f"{role}_cpu_us_per_message"]}))
            job.finish()
        finally:
            watchdog.cancel()
            job.close()
    summary = summarise(sizes, rounds)
    for s in summary:
        emit(dict(s, kind="summary"))
    print(table(summary, args.tensors))
    if profiles:
        print(profile_table(profiles))
    result = {"benchmark": "message_cost", "network": "loopback", "tensors": args.tensors,
              "reply_bytes": REPLY_BYTES, "counted": COUNTED,
              "job_malloc": job.worker_malloc,
              "cpu_clock_tick_s": TICK_S, "niceness": niceness, "messages": counts, "rounds": rounds,
              "summary": summary,
              "profiles": profiles, "load_average": os.getloadavg(), "machine": describe_machine()}
    save_result(args.output, result)


if __name__ == "__main__":
    main()
