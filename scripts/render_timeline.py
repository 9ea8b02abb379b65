"""Renders one training step of bps_tf timelines (Chrome trace files, one per worker) as a PNG: one row per
tensor and worker, one coloured bar per stage.

A step is a burst of activity: spans closer than --gap milliseconds belong to one burst. --step picks the
burst (0 is the first; the default skips the first, which includes start-up and the declarations).

    python scripts/render_timeline.py TRACE.json [TRACE.rank1.json ...] -o step.png [--step 2] [--gap 5]
"""

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

STAGE_COLOURS = {
    "QUEUE": "#c7c7c7", "DECLARE": "#9467bd", "SCHEDULE": "#ffbb78", "PUSH": "#1f77b4", "SUM_PULL": "#2ca02c",
    "FETCH": "#17becf", "REDUCE_COPY_D2H": "#d62728", "COPY_H2D_BROADCAST": "#e377c2",
}


def load_trace(path):
    """The events of one trace file; a trace cut short (its process killed) lacks the closing bracket."""
    with open(path) as file:
        text = file.read().rstrip()
    if not text.endswith("]"):
        text = text.rstrip(",") + "\n]"
    return json.loads(text)


def spans(events):
    return [e for e in events if e.get("ph") == "X"]


def bursts(all_spans, gap_us):
    """Time windows (begin, end) of activity separated by idle gaps longer than `gap_us`."""
    windows = []
    for span in sorted(all_spans, key=lambda s: s["ts"]):
        begin, end = span["ts"], span["ts"] + span["dur"]
        if windows and begin <= windows[-1][1] + gap_us:
            windows[-1][1] = max(windows[-1][1], end)
        else:
            windows.append([begin, end])
    return windows


def worker_of(events, fallback):
    names = [e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"]
    return names[0] if names else fallback


def render(traces, step, gap_ms, output, title):
    every_span = [s for _, events in traces for s in spans(events)]
    windows = bursts(every_span, gap_ms * 1000)
    if not windows:
        sys.exit("the traces hold no spans: was the timeline on while tensors were reduced?")
    if not -len(windows) <= step < len(windows):
        sys.exit(f"--step {step}: the traces hold {len(windows)} bursts of activity (0..{len(windows) - 1}); "
                 "try a smaller --gap to split them finer")
    begin, end = windows[step]

    rows = []  # (label, spans of that row within the window)
    for worker, events in traces:
        chosen = [s for s in spans(events) if begin <= s["ts"] <= end]
        by_tensor = {}
        for span in chosen:
            by_tensor.setdefault(span["args"]["tensor"], []).append(span)
        for tensor, tensor_spans in sorted(by_tensor.items(), key=lambda item: min(s["ts"] for s in item[1])):
            rows.append((f"{worker}: {tensor}", tensor_spans))

    figure, axes = plt.subplots(figsize=(12, 0.6 + 0.28 * len(rows)))
    for index, (_, row_spans) in enumerate(rows):
        for span in row_spans:
            colour = STAGE_COLOURS.get(span["name"], "#7f7f7f")
            axes.barh(index, span["dur"] / 1000, left=(span["ts"] - begin) / 1000, height=0.7, color=colour)
    axes.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("milliseconds from the start of the step")
    axes.set_title(title or f"one step: {len(rows)} tensor rows, {(end - begin) / 1000:.1f} ms")
    seen = sorted({s["name"] for _, row_spans in rows for s in row_spans})
    axes.legend(handles=[Patch(color=STAGE_COLOURS.get(n, "#7f7f7f"), label=n) for n in seen], fontsize=7,
                loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, never over them
    figure.tight_layout()
    figure.savefig(output, dpi=120)
    print(f"{output}: burst {step % len(windows)} of {len(windows)}, {len(rows)} rows, {(end - begin) / 1000:.1f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", help="trace files written by bps_tf (one per worker)")
    parser.add_argument("-o", "--output", default="timeline.png")
    parser.add_argument("--step", type=int, default=1, help="which burst of activity (negative: from the end)")
    parser.add_argument("--gap", type=float, default=5.0, help="idle milliseconds that separate steps")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    traces = []
    for index, path in enumerate(args.traces):
        events = load_trace(path)
        traces.append((worker_of(events, f"trace {index}"), events))
    render(traces, args.step, args.gap, args.output, args.title)


if __name__ == "__main__":
    main()
