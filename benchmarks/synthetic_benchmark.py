"""Training throughput of real models on synthetic data, as Horovod's tensorflow2_synthetic_benchmark.py
measures it: ResNet-50 (images/s), a BERT-base-sized encoder (tokens/s) and an 88M-parameter MLP, Keras fit,
float32 and mixed_float16, every setup in the same run as plain Keras on one GPU.

Setups, each a fresh job on the first N GPUs (CUDA_VISIBLE_DEVICES):
  keras            plain Keras on one GPU, jit_compile="auto" (Keras compiles the step with XLA on a GPU);
                   every other setup's efficiency is its total over N times this one's
  keras_nojit      the same with jit_compile=False
  mirrored         tf.distribute.MirroredStrategy over the N GPUs (Keras turns XLA off under it)
  bps              BytePSStrategy, one process per GPU (bpslaunch --local-size N), jit_compile="auto" (XLA)
  bps_nojit        the same with jit_compile=False
  bps_server       bps through a CPU server on the host (BYTEPS_FORCE_DISTRIBUTED=1)
  bps_shared       2 worker machines sharing the GPUs through a CPU server (2N processes, XLA)
  bps_one_process  BytePSStrategy, one process driving the N GPUs (XLA needs one GPU per process: off)
  horovod          bps_tf.keras's DistributedOptimizer (the Horovod API), one process per GPU, XLA
A setup may carry settings for its processes as SETUP@NAME=VALUE[@NAME=VALUE...], e.g.
bps_shared@BYTEPS_PARTITION_BYTES=8388608, so that variants are compared in the same run.

    python -m benchmarks.synthetic_benchmark [--models resnet50 bert mlp] [--precisions float32 mixed_float16]
        [--gpus 1] [--setups ...] [--steps 30] [--rounds 3] [--fit-calls] [--json OUT.json] [--smoke]

Each process times `rounds` rounds of `steps` steps after a warm-up round (which compiles); a setup's rate is
the best round's, summed over its processes. A round is an epoch of one fit() call, or with --fit-calls a fit()
call of its own, timed whole (its fixed cost included). --smoke runs tiny models on the CPU (a check of this code).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from benchmarks.lib.processes import benchmark_env, parse_env_items
from benchmarks.lib.results import describe_machine, save_result

SETUPS = ("keras", "keras_nojit", "mirrored", "bps", "bps_nojit", "bps_server", "bps_shared", "bps_one_process",
          "horovod")
WORKER = "benchmarks.workers.synthetic"


def command_of(setup, gpus, worker_args):
    """The command line of `setup` on `gpus` GPUs, and the settings it adds to the environment."""
    worker = [sys.executable, "-m", WORKER, "--setup", setup, *worker_args]
    if setup.startswith(("keras", "mirrored")):
        return worker, {}
    machines, local_size, env = 1, gpus, {}
    if setup == "bps_one_process":
        local_size = 1
    if setup == "bps_server":
        env["BYTEPS_FORCE_DISTRIBUTED"] = "1"
    if setup == "bps_shared":
        machines = 2
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"  # two processes on each GPU
    # bpslaunch as a module: on a GPU machine bps_tf may be on PYTHONPATH rather than installed.
    return [sys.executable, "-m", "bps_tf.launcher", "--local", "--workers", str(machines), "--local-size", str(local_size), "--servers", "1",
            "--output-ranks", "0", "--"] + worker, env


def parse_setup(spelling):
    """'bps_shared@NAME=VALUE' -> ('bps_shared', {NAME: VALUE}); refuses setups it does not know."""
    setup, *settings = spelling.split("@")
    if setup not in SETUPS:
        raise argparse.ArgumentTypeError(f"unknown setup {setup!r}: one of {', '.join(SETUPS)}")
    return setup, parse_env_items(settings)


def run_setup(spelling, model, precision, gpus, args):
    setup, settings = parse_setup(spelling)
    jit = "false" if setup.endswith("nojit") else "auto"
    with tempfile.TemporaryDirectory(prefix="bps_tf_synthetic_") as out:
        worker_args = ["--model", model, "--precision", precision, "--steps", str(args.steps), "--rounds",
                       str(args.rounds), "--jit", jit, "--out", out] + (["--smoke"] if args.smoke else []) + \
            (["--fit-calls"] if args.fit_calls else [])
        command, extra = command_of(setup, gpus, worker_args)
        devices = "" if args.smoke else ",".join(map(str, range(1 if setup.startswith("keras") else gpus)))
        env = benchmark_env({"CUDA_VISIBLE_DEVICES": devices, "NCCL_NVLS_ENABLE": "0", **extra, **settings})
        if os.environ.get("PYTHONPATH"):  # a bps_tf placed first (the CUDA build), then the checkout's;
            # PYTHONSAFEPATH keeps `python -m` from putting the checkout (its bps_tf unbuilt) before it
            env.update(PYTHONPATH=os.environ["PYTHONPATH"] + os.pathsep + env["PYTHONPATH"], PYTHONSAFEPATH="1")
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
        if done.returncode != 0:
            raise SystemExit(f"{spelling} {model} {precision} on {gpus} GPUs failed:\n{done.stdout[-4000:]}\n"
                             f"{done.stderr[-4000:]}")
        processes = [json.load(open(os.path.join(out, name))) for name in sorted(os.listdir(out))]
    best = [max(p["rates"]) for p in processes]
    first = processes[0]
    return dict(setup=spelling, model=model, precision=precision, gpus=gpus, processes=len(processes),
                unit=first["unit"], total_rate=sum(best), per_process_rate=best, ms_per_step=min(first["ms_per_step"]),
                jit_compile=first["jit_compile"], fit_calls=first["fit_calls"], parameters=first["parameters"],
                rounds=[p["rates"] for p in processes])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["resnet50", "bert", "mlp"],
                        choices=["resnet50", "bert", "mlp"])
    parser.add_argument("--precisions", nargs="+", default=["float32", "mixed_float16"])
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), help="SETUP[@NAME=VALUE...] (above)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=900, help="seconds for one setup's job")
    parser.add_argument("--fit-calls", action="store_true", help="each round a fit() call of its own")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    for spelling in args.setups:
        try:
            parse_setup(spelling)
        except (argparse.ArgumentTypeError, SystemExit) as refused:
            parser.error(str(refused))
    rows, baseline = [], {}
    print("| model | precision | setup | GPUs | processes | XLA | rate | ms/step | vs plain Keras x GPUs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model in args.models:
        for precision in args.precisions:
            for spelling in args.setups:
                setup = parse_setup(spelling)[0]
                if setup == "bps_one_process" and args.gpus == 1:
                    continue  # the same job as bps
                row = run_setup(spelling, model, precision, args.gpus, args)
                if spelling == "keras":
                    baseline[model, precision] = row["total_rate"]
                reference = baseline.get((model, precision))
                row["efficiency"] = row["total_rate"] / (reference * args.gpus) if reference else None
                rows.append(row)
                efficiency = "-" if row["efficiency"] is None else f"{row['efficiency']:.2f}"
                print(f"| {model} | {precision} | {spelling} | {args.gpus} | {row['processes']} | "
                      f"{'yes' if row['jit_compile'] else 'no'} | {row['total_rate']:.0f} {row['unit']} | "
                      f"{row['ms_per_step']:.1f} | {efficiency} |", flush=True)
    save_result(args.json, {"command": sys.argv, "machine": describe_machine(), "rows": rows})


if __name__ == "__main__":
    main()
