"""Compute time of one training step (forward and backward, no communication) of BERT-large and ResNet-50 on
one GPU, without XLA (PyTorch, eager: one kernel launch per operation, as TensorFlow without XLA) and with XLA
(the same model in JAX, compiled by XLA as one program): the compute the step model (bps_tf.plan) hides
communication under. bf16 mixed precision, batch 64 per GPU (BytePS's BERT-large and ResNet-50 setups).

Run as a script on a GPU machine that has PyTorch and JAX (not TensorFlow):
    python3 benchmarks/gpu_compute_step.py --json docs/gpu/compute_step_h200.json
"""

import argparse
import json
import statistics
import sys
import time
import traceback


def time_steps(step, sync, steps, warmup):
    for _ in range(warmup):
        step()
    sync()
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        sync()
        seconds.append(time.perf_counter() - start)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--cases", default="bert_large/torch,bert_large/jax,resnet50/torch,resnet50/jax")
    parser.add_argument("--json")
    args = parser.parse_args()
    from benchmarks.lib import compute_jax, compute_torch

    backends = {"torch": compute_torch, "jax": compute_jax}
    rows = []
    for case in args.cases.split(","):
        model, backend = case.split("/")
        try:
            step, sync, device = backends[backend].make_step(model, args.batch)
            seconds = time_steps(step, sync, args.steps, args.warmup)
            row = {"model": model, "framework": backend, "xla": backend == "jax", "batch": args.batch,
                   "device": device, "step_s": seconds, "median_step_s": statistics.median(seconds)}
            print(f"{model} {backend}: {row['median_step_s'] * 1e3:.1f} ms per step", flush=True)
        except Exception:  # one failed case should not lose the others
            traceback.print_exc()
            row = {"model": model, "framework": backend, "error": traceback.format_exc(limit=3)}
        rows.append(row)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"benchmark": "gpu_compute_step", "runs": rows}, out, indent=1)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
