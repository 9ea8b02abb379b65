"""The plot of an elastic recovery result (benchmarks/elastic_recovery.py), written next to its JSON: the job's
throughput over time with each kill and rejoin marked, what follows each kill of a worker (w1), a server (s1)
or the scheduler (sched):
the survivors' next steps, the restarted process's start, a worker's join, the first step with every worker or
server again; and the step time under each commit setting.

python -m benchmarks.report.elastic_plots docs/performance/elastic_recovery_w4_s4_1gbit.json
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def _where(result):
    if result["network"] == "loopback":
        return "one host, loopback"
    return f"emulated cluster, {result['rate']} links, a worker and a server per host"


def _name(kill):
    if "scheduler" in kill:
        return "sched"
    return f"w{kill['worker']}" if "worker" in kill else f"s{kill['server']}"


def plot_series(result, axes, sizes):
    """Samples/s over time on `axes`, the job's workers on `sizes` (below it, same time axis)."""
    series = result["throughput"]
    t = series["t"] + [series["t"][-1] + series["bin_s"]]
    axes.stairs(series["samples_per_s"], t, color="C0", lw=1.5, label="samples/s of the whole job")
    axes.set_ylim(0, max(series["samples_per_s"]) * 1.15)
    axes.set_ylabel(f"samples/s ({series['bin_s']:g} s bins)")
    sizes.stairs(series["workers"], t, color="C7", lw=1.2)
    sizes.set_ylim(0, result["workers"] + 0.5)
    sizes.set_yticks(range(0, result["workers"] + 1))
    sizes.set_ylabel("workers")
    sizes.set_xlabel("time since the first step of the recovery phase, s (workers: the most that stepped in a bin)")
    for i, kill in enumerate(result["recovery"]["kills"]):
        first = kill["restart"]["first_step_s"]
        for where in (axes, sizes):
            where.axvline(kill["t"], color="C3", ls="--", lw=1, label="kill -9" if i == 0 and where is axes else None)
            if first is not None:
                where.axvline(kill["t"] + first, color="C2", ls=":", lw=1.4,
                              label="back: first step with every worker or server" if i == 0 and where is axes
                              else None)
        axes.text(kill["t"], axes.get_ylim()[1] * 0.98, f" {_name(kill)}", color="C3", fontsize=8, va="top")
    axes.legend(fontsize=7, loc="lower left")
    medians = [f"{what} {r['median_next_step_s']:.2f} s" for what, r in
               (("worker", result["recovery"]), ("server", result["recovery"].get("server_kills")),
                ("scheduler", result["recovery"].get("scheduler_kills")))
               if r and r["median_next_step_s"] is not None]
    axes.set_title(f"{result['workers']} workers + {result['servers']} servers, {_where(result)}\n"
                   f"{result['model']} ({result['gradient_bytes'] / 1e6:.1f} MB of gradients), "
                   f"{result['batch_per_worker']} samples per worker and step, a commit every "
                   f"{result['batches_per_commit']} batch(es)\nthe survivors' next step after a kill, median: "
                   f"{', '.join(medians)}", fontsize=9)


def plot_recoveries(result, axes):
    """One row per kill, seconds from the kill: each survivor's next completed step, and when the restarted
    process was up, had joined (a worker) and the first step with every worker or server again."""
    kills = result["recovery"]["kills"]
    marks = (("process_started_s", "restarted process up", "C7", "|"), ("joined_s", "restarted worker joined", "C1", "x"),
             ("first_step_s", "first step with every worker / server", "C2", "D"))
    for row, kill in enumerate(kills):
        steps = [s["next_step_s"] for s in kill["survivors"] if s["next_step_s"] is not None]
        axes.scatter(steps, [row] * len(steps), color="C3", marker="o", s=18, zorder=3,
                     label="a survivor's next step" if row == 0 else None)
        for key, label, color, marker in marks:
            value = kill["restart"].get(key)
            if value is not None:
                axes.scatter([value], [row], color=color, marker=marker, s=28, zorder=3,
                             label=label if row == 0 else None)
        if steps:
            axes.text(max(steps), row + 0.22, f"{max(steps):.2f} s", color="C3", fontsize=7)
    axes.set_yticks(range(len(kills)), [f"kill -9 of {_name(k)}" for k in kills], fontsize=7)
    axes.set_ylim(len(kills) - 0.5, -0.7)
    axes.set_xlim(left=0)
    axes.set_xlabel("seconds after the kill", fontsize=8)
    axes.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    axes.set_title("after each kill", fontsize=9)


def plot_commits(result, axes):
    costs = [c for c in result["commit_costs"] if c["mean_step_s"] is not None]
    labels = ["no elastic\ncallbacks" if c["setting"] == "none" else f"every {c['setting']}\nbatch(es)"
              for c in costs]
    values = [c["mean_step_s"] * 1e3 for c in costs]
    bars = axes.bar(range(len(values)), values, color=[f"C{i}" for i in range(len(values))])
    for bar, cost in zip(bars, costs):
        note = "" if cost["median_commit_s"] is None else f"\ncommit {cost['median_commit_s'] * 1e3:.0f} ms"
        axes.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{bar.get_height():.0f} ms{note}",
                  ha="center", va="bottom", fontsize=7)
    axes.set_xticks(range(len(values)), labels, fontsize=7)
    axes.set_ylabel("mean step time, ms")
    axes.set_ylim(0, max(values) * 1.25 if values else 1)
    axes.set_title("the cost of commits: mean step time\n(worker 0, before the first kill)", fontsize=9)


def plot_file(path):
    """Writes PATH with .png for the result at PATH; returns the PNG's path."""
    path = Path(path)
    result = json.loads(path.read_text())
    figure = plt.figure(figsize=(17, 5.5), layout="constrained")
    grid = figure.add_gridspec(2, 3, width_ratios=[3, 1.2, 1], height_ratios=[4, 1])
    series = figure.add_subplot(grid[0, 0])
    sizes = figure.add_subplot(grid[1, 0], sharex=series)
    series.tick_params(labelbottom=False)
    plot_series(result, series, sizes)
    plot_recoveries(result, figure.add_subplot(grid[:, 1]))
    plot_commits(result, figure.add_subplot(grid[:, 2]))
    out = path.with_suffix(".png")
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"wrote {plot_file(name)}")
