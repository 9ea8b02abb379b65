"""CPU time of running processes from /proc, of a process and every live process below it.

`tree_cpu_s`: the sum of each live thread's run time (/proc/PID/task/TID/schedstat, nanoseconds, kept by the
scheduler); a thread that ended between two readings is missing from the later one, so measure loops whose
threads live through them. `tree_ticks_s`: user + system time (/proc/PID/stat, every thread, the ended ones
included) at the clock-tick resolution (os.sysconf("SC_CLK_TCK"), usually 10 ms): the check on the other."""

import os
from pathlib import Path

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def descendants(pid):
    """`pid` and every live process below it."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat_fields(entry.name)[1])
            except (OSError, ValueError, IndexError):
                continue  # it ended while we looked
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _run_s(pid):
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended while we looked
    return total * 1e-9


def _ticks_s(pid):
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime


def _tree_sum(pid, of):
    total = 0.0
    for each in descendants(pid):
        try:
            total += of(each)
        except OSError:
            continue
    return total


def tree_cpu_s(pid):
    """CPU seconds of the live threads of `pid` and the processes below it, to the nanosecond."""
    return _tree_sum(pid, _run_s)


def tree_ticks_s(pid):
    """CPU seconds of `pid` and the live processes below it, from user and system time in clock ticks."""
    return _tree_sum(pid, _ticks_s)


def machine_busy_s():
    """CPU seconds every core of the machine spent busy (not idle, not waiting for I/O) since boot
    (/proc/stat): the difference over a loop less the loop's own processes is what else ran meanwhile."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) * TICK_S  # user nice system idle iowait irq softirq steal


def _switches(pid):
    voluntary = involuntary = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    involuntary += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return voluntary, involuntary


def tree_context_switches(pid):
    """(voluntary, involuntary) context switches of the live threads of `pid` and the processes below it: a
    voluntary one is a thread going to sleep to wait (and later being woken), an involuntary one a thread
    preempted."""
    voluntary = involuntary = 0
    for each in descendants(pid):
        try:
            v, i = _switches(each)
        except OSError:
            continue  # it ended while we looked
        voluntary, involuntary = voluntary + v, involuntary + i
    return voluntary, involuntary
