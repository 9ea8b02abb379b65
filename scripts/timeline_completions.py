"""Prints, for one training step of a bps_tf timeline (one worker's trace file), each partition's push_pull in
the order its sum came back: when its SUM_PULL span ended, the gap to the one before, its elements and when
its PUSH span ended. A step's many small tensors coming back one after another show as a long tail of
equal gaps after the last push.

A tensor's spans of each stage, in time order, are its steps: --step N takes every partition's N-th (0 is
the first; negative counts from the end; the default is the second to last, a whole step that is not the
last). Times are milliseconds from the step's first SCHEDULE span. Partitions seen fewer times than the
others (declarations, broadcasts at start-up) and tensors outside --match are left out.

    python scripts/timeline_completions.py TRACE.json [--step -2] [--match one_step_on_data]
"""

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from render_timeline import load_trace, spans  # noqa: E402

ELEMENTS = re.compile(r"(\d+) elements")


def by_partition(events, match):
    """{(tensor, stage): [spans in time order]} for the tensors whose name contains `match`."""
    found = {}
    for span in spans(events):
        tensor = span["args"]["tensor"]
        if match in tensor:
            found.setdefault((tensor, span["name"]), []).append(span)
    for spans_of_one in found.values():
        spans_of_one.sort(key=lambda s: s["ts"])
    return found


def completions(events, step=-2, match=""):
    """Rows (sum_end_ms, gap_ms, elements, push_end_ms) of step `step`, in the order the sums came back."""
    found = by_partition(events, match)
    partitions = [t for (t, stage) in found if stage == "SUM_PULL" and (t, "PUSH") in found]
    if not partitions:
        sys.exit("no partition has both PUSH and SUM_PULL spans: was the timeline on during training?")
    steps = max(len(found[(t, "SUM_PULL")]) for t in partitions)
    if not -steps <= step < steps:
        sys.exit(f"--step {step}: the trace holds {steps} steps (0..{steps - 1})")
    index = step % steps
    chosen = [t for t in partitions
              if len(found[(t, "SUM_PULL")]) == steps and len(found[(t, "PUSH")]) == steps]
    starts = [found[(t, "SCHEDULE")][index]["ts"] for t in chosen if len(found.get((t, "SCHEDULE"), [])) == steps]
    origin = min(starts) if starts else min(found[(t, "PUSH")][index]["ts"] for t in chosen)
    rows = []
    for tensor in chosen:
        summed, pushed = found[(tensor, "SUM_PULL")][index], found[(tensor, "PUSH")][index]
        detail = ELEMENTS.search(pushed["args"].get("detail", ""))
        rows.append(((summed["ts"] + summed["dur"] - origin) / 1000, int(detail.group(1)) if detail else 0,
                     (pushed["ts"] + pushed["dur"] - origin) / 1000))
    rows.sort()
    result, before = [], None
    for end, elements, push_end in rows:
        result.append((end, 0.0 if before is None else end - before, elements, push_end))
        before = end
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="one worker's trace file written by bps_tf")
    parser.add_argument("--step", type=int, default=-2)
    parser.add_argument("--match", default="", help="only tensors whose name contains this")
    args = parser.parse_args()
    print("# sum_pull_end_ms gap_ms elements push_end_ms")
    for end, gap, elements, push_end in completions(load_trace(args.trace), args.step, args.match):
        print(f"{end:.1f} {gap:.2f} {elements} {push_end:.1f}")


if __name__ == "__main__":
    main()
