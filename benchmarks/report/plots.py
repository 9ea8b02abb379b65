"""PNG plots of every result file in a folder, each written next to its JSON (same name, .png).

python -m benchmarks.report.plots docs/performance
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.report.tables import human_bytes, strategy_label  # noqa: E402

LABELS = {"bps_tf": "bps_tf push_pull (TF op)", "bps_core": "bps_tf push_pull (NumPy core)",
          "tf_ring": "TF MultiWorkerMirroredStrategy RING all-reduce"}


def _title(result):
    where = result.get("network", "")
    if where == "emulated":
        where = f"emulated cluster, {result['bounds']['rate']} links"
        if result.get("colocate"):
            where += ", servers on worker hosts"
    return f"{result['workers']} workers, {result['servers']} servers, {where}"


def plot_push_pull(result, axes):
    sizes = [row["bytes"] for row in result["results"]]
    for key, label in LABELS.items():
        axes.plot(sizes, [row["bytes"] / row[key]["median_s"] / 1e6 for row in result["results"]], "o-",
                  label=label)
    bounds = result.get("bounds")
    if bounds:
        link = bounds["link_bytes_s"] / 1e6
        axes.axhline(link / bounds["push_pull_factor"], color="C0", ls=":", label="push_pull bound B (or B / (2(N-1)/N) co-located)")
        axes.axhline(link / bounds["ring_factor"], color="C2", ls=":", label="ring bound B / (2(N-1)/N)")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(sizes, [human_bytes(s) for s in sizes], rotation=45)
    axes.set_xlabel("tensor size")
    axes.set_ylabel("bandwidth, MB/s (size / time)")
    axes.set_title(_title(result), fontsize=10)
    axes.legend(fontsize=7)


def _bars(axes, labels, values, xlabel, title):
    """Horizontal bars, first run on top: the variants' labels are long."""
    positions = range(len(values))
    axes.barh(positions, values, color=[f"C{i % 10}" for i in positions])
    axes.set_yticks(list(positions), labels, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel(xlabel)
    axes.set_title(title, fontsize=10)


def plot_runs(result, axes_row, label_of, value_of, ylabel):
    models = sorted({r["model"] for r in result["runs"]})
    for axes, model in zip(axes_row, models):
        runs = [r for r in result["runs"] if r["model"] == model]
        _bars(axes, [label_of(r) for r in runs], [value_of(r) for r in runs], ylabel,
              f"{model}: {result['workers']} workers, {result['servers']} servers, {result['rate']} links")


def plot_link_trace(result, axes):
    samples = result["samples"]
    times = [r["t_s"] for r in samples]
    axes.plot(times, [r["sent_mb_s"] for r in samples], label="worker sends (push)")
    axes.plot(times, [r["received_mb_s"] for r in samples], label="worker receives (pull)")
    axes.set_xlabel("time, s")
    axes.set_ylabel("MB/s over 10 ms")
    axes.set_title(f"1 worker, 1 server, {result['rate']} link: push_pull of {human_bytes(result['bytes'])}",
                   fontsize=10)
    axes.legend(fontsize=8)


MODEL_NAMES = {"mlp": "wide MLP", "encoder": "BERT-like encoder"}


def plot_accuracy(result, axes_row):
    for r in result["runs"]:
        curve = r["curve"]
        label = "MWMS (RING)" if r["variant"] == "mwms" else f"BytePSStrategy, {r['variant']}"
        accuracy = [p["accuracy"] for p in curve]
        axes_row[0].plot([p["train_s"] for p in curve], accuracy, "o-", ms=3, label=label)
        axes_row[1].plot([p["steps"] for p in curve], accuracy, "o-", ms=3, label=label)
    for axes, xlabel in zip(axes_row, ("training time, s", "steps")):
        axes.axhline(result["target"], color="grey", ls=":", label="target")
        axes.set_xlabel(xlabel)
        axes.set_ylabel("test accuracy")
        axes.set_ylim(0.8, 1.0)
        axes.set_title(f"digits, {MODEL_NAMES[result.get('model', 'mlp')]}: {result['workers']} workers, "
                       f"{result['servers']} servers, {result['rate']} links", fontsize=10)
        axes.legend(fontsize=7)


def _predicted_against_measured(axes, groups, title):
    """groups: [(label, points, marker, colour, hollow)]; log-log, the diagonal and the +-15% band."""
    every = [p for _, points, *_ in groups for p in points]
    low = min(min(p["measured_s"], p["predicted_s"]) for p in every) * 1e3 / 1.5
    high = max(max(p["measured_s"], p["predicted_s"]) for p in every) * 1e3 * 1.5
    axes.plot([low, high], [low, high], color="grey", lw=1)
    axes.fill_between([low, high], [low * 0.85, high * 0.85], [low * 1.15, high * 1.15], color="grey", alpha=0.15,
                      label="within 15%")
    for label, points, marker, colour, hollow in groups:
        if points:
            axes.scatter([p["measured_s"] * 1e3 for p in points], [p["predicted_s"] * 1e3 for p in points],
                         marker=marker, edgecolors=colour, facecolors="none" if hollow else colour, label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlim(low, high)
    axes.set_ylim(low, high)
    axes.set_xlabel("measured, ms")
    axes.set_ylabel("predicted by the step model, ms")
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=7)


def plot_model_validation(result, axes_row, training=None):
    """Predicted against measured: push_pull cases by worker count (hollow: the 2-worker cases the fit
    used), and beside them the Keras steps of a step_model_training result when there is one."""
    groups = []
    for rate, marker in (("1gbit", "o"), ("100mbit", "s")):
        for (workers, servers), colour in (((2, 2), "C0"), ((4, 4), "C1"), ((8, 8), "C2"), ((8, 4), "C3")):
            points = [p for p in result["points"]
                      if p["rate"] == rate and (p["workers"], p["servers"]) == (workers, servers)]
            label = f"{rate}, {workers} workers, {servers} servers" + (" (fitted)" if workers == 2 else "")
            groups.append((label, points, marker, colour, workers == 2))
    _predicted_against_measured(axes_row[0], groups, "push_pull on the emulated cluster (single tensors, BERT-like set)")
    if training and len(axes_row) > 1:
        groups = []
        for rate, marker in (("1gbit", "^"), ("100mbit", "v")):
            for workers, colour in ((2, "C0"), (4, "C1"), (8, "C2")):
                points = [p for p in training["points"] if p["rate"] == rate and p["workers"] == workers]
                groups.append((f"{rate}, {workers} workers, {workers} servers", points, marker, colour, False))
        _predicted_against_measured(axes_row[1], groups, f"Keras step (BytePSStrategy, {training['model']})")


def plot_scaling(result, axes_row):
    for axes, model in zip(axes_row, ("bert-large", "resnet50")):
        for i, link in enumerate(("25gbit", "100gbit")):
            rows = [r for r in result["rows"] if r["model"] == model and r["link"] == link and r["xla"]]
            gpus = [r["gpus"] for r in rows]
            axes.plot(gpus, [r["bps_efficiency"] for r in rows], "o-", color=f"C{i}", label=f"bps_tf, {link}")
            axes.plot(gpus, [r["ring_efficiency"] for r in rows], "s--", color=f"C{i}", label=f"ring all-reduce, {link}")
        axes.set_xscale("log", base=2)
        axes.set_xticks(gpus, [str(g) for g in gpus])
        axes.set_ylim(0, 1.05)
        axes.set_xlabel("GPUs (8 per machine)")
        axes.set_ylabel("scaling efficiency")
        axes.set_title(f"{model}, H200 compute with XLA: predicted", fontsize=10)
        axes.legend(fontsize=7)


def plot_stragglers(result, axes_row):
    """One panel per straggler: test accuracy over training time, a line per mode."""
    slowdowns = sorted({r["slowdown"] for r in result["runs"]})
    for axes, slowdown in zip(axes_row, slowdowns):
        for r in (r for r in result["runs"] if r["slowdown"] == slowdown):
            curve = r["curve"]
            axes.plot([p["train_s"] for p in curve], [p["accuracy"] for p in curve], "o-", ms=3, label=r["mode"])
        axes.axhline(result["target"], color="grey", ls=":", label="target")
        axes.set_xlabel("training time, s")
        axes.set_ylabel("test accuracy")
        axes.set_ylim(0.5, 1.0)
        axes.set_title(("no straggler" if slowdown == 1 else f"one worker slowed {slowdown:g}x") +
                       f": {result['workers']} workers, {result['servers']} servers, {result['rate']}", fontsize=10)
        axes.legend(fontsize=7)


def plot_file(path):
    result = json.loads(path.read_text())
    kind = result.get("benchmark")
    if kind == "push_pull":
        figure, axes = plt.subplots(figsize=(8, 5))
        plot_push_pull(result, axes)
    elif kind == "link_trace":
        figure, axes = plt.subplots(figsize=(10, 4))
        plot_link_trace(result, axes)
    elif kind == "time_to_accuracy":
        figure, axes = plt.subplots(1, 2, figsize=(12, 5))
        plot_accuracy(result, axes)
    elif kind == "stragglers":
        panels = len({r["slowdown"] for r in result["runs"]})
        figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.5), squeeze=False)
        plot_stragglers(result, axes[0])
    elif kind == "step_model_validation":
        training = path.with_name("step_model_training.json")
        training = json.loads(training.read_text()) if training.exists() else None
        figure, axes = plt.subplots(1, 2 if training else 1, figsize=(13 if training else 7, 6), squeeze=False)
        plot_model_validation(result, axes[0], training)
    elif kind == "scaling_predictions":
        figure, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        plot_scaling(result, axes)
    elif kind in ("train", "tuning"):
        models = sorted({r["model"] for r in result["runs"]})
        rows = max(sum(r["model"] == m for r in result["runs"]) for m in models)
        figure, axes = plt.subplots(1, len(models), figsize=(9 * len(models), 1.5 + 0.35 * rows), squeeze=False)
        if kind == "train":
            plot_runs(result, axes[0], strategy_label, lambda r: r["samples_per_s"],
                      "samples/s (higher is better)")
        else:
            plot_runs(result, axes[0], lambda r: r["variant"], lambda r: r["median_step_s"] * 1e3,
                      "step time, ms (lower is better)")
    else:
        return None
    figure.tight_layout()
    out = path.with_suffix(".png")
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def main(folder):
    for path in sorted(Path(folder).glob("*.json")):
        out = plot_file(path)
        if out:
            print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/performance")
