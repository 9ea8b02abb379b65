"""The fixed cost of a Keras fit() call and of an epoch: plain Keras, MirroredStrategy on one CPU device and
BytePSStrategy with 1 and 2 workers (bpslaunch --local, one server), each a fresh job, on the digits MLP.

    python -m benchmarks.fit_overhead [--keras keras|tf_keras] [--workers 1,2] [--steps 5] [--calls 10]
                                      [--epochs 10] [--rounds 3] [--baseline DIR] [--output OUT.json]

Each job times `--calls` fit() calls of one epoch of `--steps` steps (after one untimed call), then one fit()
of `--epochs` epochs, marking every step and epoch with a callback. A call's fixed cost is its time less its
steps' (`--steps` x the median step), an epoch's is the median time between the starts of consecutive
epochs less its steps'. CPU time (worker 0's process, all threads) per call and per epoch is given too: it
moves less than wall time when other processes load the machine. The jobs run `--rounds` times in turn;
the table gives the median over the rounds of each job's medians, each strategy's extra over plain Keras
and the ratio. `--baseline DIR` (another checkout of bps_tf, built, e.g. a `git worktree` of an older commit)
runs its BytePSStrategy jobs in every round too, each after this checkout's, for a before/after comparison
on the machine's load of the moment.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.lib.processes import benchmark_env
from benchmarks.lib.results import describe_machine, save_result
from testing.jobs import BPSLAUNCH

BATCH = 64
VARIANTS = {"plain": "plain Keras", "mirrored": "MirroredStrategy (1 CPU)", "bps": "BytePSStrategy"}


def _strategy(variant):
    import tensorflow as tf

    if variant == "plain":
        return tf.distribute.get_strategy()
    if variant == "mirrored":
        return tf.distribute.MirroredStrategy(["/cpu:0"])
    from bps_tf import BytePSStrategy

    return BytePSStrategy()


def measure(variant, keras_name, steps, calls, epochs):
    """One job's figures (printed as a JSON line by worker 0)."""
    if keras_name == "tf_keras":
        import tf_keras as keras
    else:
        import keras
    from testing import digits

    x, y, _, _ = digits.load(0, 1)
    x, y = x[:steps * BATCH], y[:steps * BATCH]
    strategy = _strategy(variant)
    with strategy.scope():
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    marks, cpu_marks = [], []

    class Marks(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            marks.append(("epoch", time.perf_counter()))
            cpu_marks.append(time.process_time())

        def on_train_batch_begin(self, batch, logs=None):
            marks.append(("step", time.perf_counter()))

    def fit(n_epochs):
        model.fit(x, y, batch_size=BATCH, epochs=n_epochs, verbose=0, shuffle=False, callbacks=[Marks()])

    fit(1)
    call_s, call_cpu_s = [], []
    for _ in range(calls):
        start, start_cpu = time.perf_counter(), time.process_time()
        fit(1)
        call_s.append(time.perf_counter() - start)
        call_cpu_s.append(time.process_time() - start_cpu)
    marks.clear()
    cpu_marks.clear()
    fit(epochs)
    epoch_starts = [t for kind, t in marks if kind == "epoch"]
    step_s = [b[1] - a[1] for a, b in zip(marks, marks[1:]) if a[0] == b[0] == "step"]
    step = statistics.median(step_s)
    call, epoch = statistics.median(call_s), statistics.median(b - a for a, b in zip(epoch_starts, epoch_starts[1:]))
    row = {"call_ms": 1e3 * call, "epoch_ms": 1e3 * epoch, "step_ms": 1e3 * step,
           "call_fixed_ms": 1e3 * (call - steps * step), "epoch_fixed_ms": 1e3 * (epoch - steps * step),
           "call_min_ms": 1e3 * min(call_s), "call_max_ms": 1e3 * max(call_s),
           "call_cpu_ms": 1e3 * statistics.median(call_cpu_s),
           "epoch_cpu_ms": 1e3 * statistics.median(b - a for a, b in zip(cpu_marks, cpu_marks[1:]))}
    if variant == "bps":
        import bps_tf

        if bps_tf.rank() != 0:
            row = None
        bps_tf.shutdown()
    if row is not None:
        print("RESULT " + json.dumps(row), flush=True)


def run_job(variant, workers, args, root=None):
    """One job's figures; `root`: the checkout whose code it runs (default this one)."""
    worker = [sys.executable, "-m", "benchmarks.fit_overhead", "--worker", variant, "--keras", args.keras,
              "--steps", str(args.steps), "--calls", str(args.calls), "--epochs", str(args.epochs)]
    env = {"TF_CPP_MIN_LOG_LEVEL": "3"}
    if root:
        env["PYTHONPATH"] = root
    if args.keras == "tf_keras":
        env["TF_USE_LEGACY_KERAS"] = "1"
    if variant == "bps":
        worker = [BPSLAUNCH, "--local", "--workers", str(workers), "--servers", "1", "--timeout",
                  str(args.timeout), "--"] + worker
    done = subprocess.run(worker, env=benchmark_env(env), cwd=root, capture_output=True, text=True,
                          timeout=args.timeout + 60)
    results = [line.split("RESULT ", 1)[1] for line in done.stdout.splitlines() if "RESULT " in line]
    if done.returncode != 0 or not results:
        raise SystemExit(f"{_label(variant, root)} ({workers} workers) failed (exit status {done.returncode}):\n"
                         f"{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")
    return json.loads(results[0])


def _label(variant, baseline):
    return VARIANTS[variant] + (" (baseline)" if baseline else "")


def table(rows):
    base = rows[0]
    lines = ["| variant | workers | ms per call | ms per epoch | ms per step | fixed ms per call (extra, ratio) "
             "| fixed ms per epoch (extra, ratio) | CPU ms per call, per epoch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        extra = []
        for key in ("call_fixed_ms", "epoch_fixed_ms"):
            ratio = row[key] / base[key] if base[key] > 0 else float("nan")
            extra.append(f"{row[key]:.0f} ({row[key] - base[key]:+.0f}, {ratio:.1f}x)")
        lines.append(f"| {_label(row['variant'], row.get('baseline'))} | {row['workers']} | {row['call_ms']:.0f} | "
                     f"{row['epoch_ms']:.0f} | {row['step_ms']:.1f} | {extra[0]} | {extra[1]} | "
                     f"{row['call_cpu_ms']:.0f}, {row['epoch_cpu_ms']:.0f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--keras", choices=("keras", "tf_keras"), default="keras",
                        help="Keras 3 (default) or tf-keras (TF_USE_LEGACY_KERAS=1)")
    parser.add_argument("--workers", default="1,2", help="BytePSStrategy's worker counts (default 1,2)")
    parser.add_argument("--steps", type=int, default=5, help="steps per epoch (batches of 64)")
    parser.add_argument("--calls", type=int, default=10, help="timed fit() calls of one epoch")
    parser.add_argument("--epochs", type=int, default=10, help="epochs of the fit() whose epochs are timed")
    parser.add_argument("--rounds", type=int, default=3, help="times every job runs, in turn")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a job may take")
    parser.add_argument("--baseline", help="another checkout of bps_tf whose BytePSStrategy jobs run in the "
                                           "same rounds, each after this checkout's")
    parser.add_argument("--output", help="write the result as JSON")
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs: at least 2 (epochs are timed between their starts)")
    if args.worker:
        return measure(args.worker, args.keras, args.steps, args.calls, args.epochs)
    baseline = args.baseline and str(Path(args.baseline).resolve())
    jobs = [("plain", 1, None), ("mirrored", 1, None)] + [
        ("bps", int(n), root) for n in args.workers.split(",") for root in ([None, baseline] if baseline else [None])]
    rounds = []
    for round_ in range(args.rounds):
        rounds.append([dict(run_job(variant, workers, args, root), variant=variant, workers=workers,
                            baseline=bool(root))
                       for variant, workers, root in jobs])
        print(f"round {round_ + 1} of {args.rounds}: done", file=sys.stderr, flush=True)
    rows = [dict({key: statistics.median(r[i][key] for r in rounds) for key in rounds[0][i]
                  if key.endswith("_ms")}, variant=variant, workers=workers, baseline=bool(root))
            for i, (variant, workers, root) in enumerate(jobs)]
    print(table(rows))
    save_result(args.output, {"benchmark": "fit_overhead", "command": sys.argv, "machine": describe_machine(),
                              "keras": args.keras, "steps": args.steps, "batch": BATCH, "baseline": baseline,
                              "rows": rows,
                              "rounds": rounds})


if __name__ == "__main__":
    main()
