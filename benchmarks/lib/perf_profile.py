"""Where a process's CPU time goes: `perf record -g` on it while a loop runs, then its symbols by self time
(`perf report --no-children`), each put in one concern by its name. The machine's hardware counters may be
unavailable (virtual machines): sampling uses the cpu-clock software event, which always works."""

import re
import signal
import subprocess
import time

# (concern, pattern on "DSO SYMBOL"), first match wins: copies before the kernel's TCP (the copy out of a
# socket is kernel code too), locking and allocation before the core's own code.
CONCERNS = [
    ("copies", r"memcpy|memmove|copy_user|copy_to_user|copy_from_user|_copy_to_iter|_copy_from_iter|rep_movs"),
    # The kernel's spin locks count as its TCP (they guard sockets and queues). Under the cpu-clock event a
    # context switch's cost shows in finish_task_switch, where interrupts are on again.
    ("locking, waking threads, context switches",
     r"pthread_(?:mutex|cond|rwlock|spin)|__condvar|std::mutex|condition_variable|__lll_lock|futex|try_to_wake_up|"
     r"__schedule|finish_task_switch"),
    ("allocation", r"malloc|\bfree\b|cfree|realloc|operator new|operator delete|_int_free|tcache|mmap|munmap|"
                   r"page_fault|clear_page|do_anonymous_page|"
                   r"\] std::(?:__cxx11::)?basic_string<[^ ]*(?: [^ ]*)*>::_M_(?:create|mutate|construct|assign)"),
    ("syscalls and kernel TCP",
     r"\[kernel|\[k\]|asynccancel|\bepoll_wait|libc_(?:recv|send|read|write)\w*$|"
     r"\b(?:recv|send|read|write)(?:v|msg|mmsg|from|to)?$"),
    # By the DSO, before the patterns on names below (a Python function that decodes is not frame parsing).
    ("Python and its bindings (a worker's API calls)", r"python3|libpython|pybind11::"),
    # (headers are built and parsed as std::strings: a string's own functions count here)
    ("frame parsing and encoding", r"Message::|Decode|Encode|Wire(?:Reader|Writer)|FrameReader|FrameWriter|"
                                   r"FramePrefix|PutString|GetString|\] std::(?:__cxx11::)?basic_string"),
    ("summing", r"Accumulat|cpu_reducer|Reduce|Kernels"),
    ("dispatch (bps_tf's own logic)", r"libbps_core|bps::"),
]


def concern_of(line):
    for concern, pattern in CONCERNS:
        if re.search(pattern, line):
            return concern
    return "other"


class Recording:
    """perf record -g of process `pid` (every thread) from __enter__ until __exit__, into `path`. perf then
    switches its counters at each of the process's context switches, which adds to their cost: the profiled
    loop costs more than an unprofiled one (recording every CPU instead disturbs less, but on this kind of
    virtual machine it lost most samples, and the kernel's copies among them)."""

    def __init__(self, pid, path, settle_s=1.0):
        self.pid, self.path, self.settle_s = pid, str(path), settle_s
        self.process = None

    def __enter__(self):
        self.process = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-g", "-p", str(self.pid), "-o",
                                         self.path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(self.settle_s)  # perf attaches to every thread before the loop starts
        if self.process.poll() is not None:
            raise RuntimeError(f"perf record failed: {self.process.stderr.read()[-2000:]}")
        return self

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGINT)
        _, errors = self.process.communicate(timeout=120)
        if self.process.returncode not in (0, -signal.SIGINT) and exc[0] is None:
            raise RuntimeError(f"perf record failed: {errors[-2000:]}")


def top_symbols(path, pid, limit=25):
    """Process `pid`'s samples: [{percent, samples, dso, symbol, concern}] by self time, largest first (at most
    `limit`); each concern's share of all samples, in percent; the number of samples."""
    report = subprocess.run(["perf", "report", "-i", str(path), "--pid", str(pid), "--stdio", "--no-children",
                             "-g", "none", "-F", "overhead,sample,dso,sym", "--percent-limit", "0"],
                            capture_output=True, text=True, timeout=300, check=True).stdout
    rows = []
    for line in report.splitlines():
        match = re.match(r"\s*([0-9.]+)%\s+([0-9]+)\s+(\S+)\s+(\[.\])\s+(.*\S)", line)
        if match:
            _, samples, dso, marker, symbol = match.groups()
            rows.append({"samples": int(samples), "dso": dso, "symbol": f"{marker} {symbol}",
                         "concern": concern_of(f"{dso} {marker} {symbol}")})
    total = sum(r["samples"] for r in rows)
    rows.sort(key=lambda r: -r["samples"])
    for row in rows:
        row["percent"] = round(100.0 * row["samples"] / total, 2)
    concerns = {}
    for row in rows:
        concerns[row["concern"]] = concerns.get(row["concern"], 0) + row["samples"]
    shares = {k: round(100.0 * v / total, 1) for k, v in sorted(concerns.items(), key=lambda kv: -kv[1])}
    return rows[:limit], shares, total
