"""The step model (bps_tf.plan) against Keras training (tf-keras, BytePSStrategy) on the emulated cluster.

For each worker count (as many servers) and rate, in one run: the link's TCP goodput (the model takes the best
of this check and the calibration's, as the validation does), the step with a barrier
after it and no gradients (`lockstep`: each worker's compute on the shared cores plus the wait for the
slowest), and the BytePSStrategy step. The model predicts the BytePSStrategy step as the lockstep step plus
the push_pulls of the model's gradients (Keras applies gradients once all have arrived: no overlap), with
the emulated machine's parameters and the fitted ones of a step_model_validation result.

python -m benchmarks.step_model_training --workers 2,4,8 --rates 1gbit,100mbit \\
    --calibration docs/performance/step_model_validation.json --output docs/performance/step_model_training.json

The predictions again from a saved result's measurements and the calibration (nothing measured):

python -m benchmarks.step_model_training --from docs/performance/step_model_training.json \\
    --calibration docs/performance/step_model_validation.json --output docs/performance/step_model_training.json
"""

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.lib import cluster_job
from benchmarks.lib.measure import rate_bytes_per_s
from benchmarks.lib.netns import EmulatedCluster
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.lib.step_model_fit import SWITCH_BUFFER_BYTES, link_goodput_fraction, predict
from benchmarks.step_model_validation import check_bytes
from benchmarks.lib.train_runs import run_training
from bps_tf.plan.parameters import MEASURED
from bps_tf.plan.step_model import step_time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="2,4,8")
    parser.add_argument("--rates", default="1gbit,100mbit")
    parser.add_argument("--model", default="mlp-small")
    parser.add_argument("--batch", type=int, default=32, help="per-worker batch")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--calibration", required=True, help="a step_model_validation result")
    parser.add_argument("--from", dest="saved", help="a saved result: predict again from its measurements")
    parser.add_argument("--output")
    return parser.parse_args()


def emulation_for(calibration, workers, rate):
    """The emulated machine's parameters at this worker count (the mean over the calibration's rounds) and the
    call time of its runs at this rate."""
    configs = [c for c in calibration["configs"] if c["workers"] == workers and c["servers"] == workers]
    if not configs:
        raise SystemExit(f"the calibration has no {workers}x{workers} configuration")
    emulation = {k: statistics.mean(c["emulation"][k] for c in configs) for k in configs[0]["emulation"]}
    emulation["call_s"] = statistics.mean(c["rates"][rate]["cases"]["single4096"]["median_s"] for c in configs)
    return emulation


def predicted_step(calibration, workers, rate, goodput, tensors, lockstep):
    """(communication, step) seconds the model predicts for a measured run."""
    link = rate_bytes_per_s(rate)
    checks = [c["rates"][rate]["goodput_bytes_s"] for c in calibration["configs"] if rate in c["rates"]]
    fraction = link_goodput_fraction(link, check_bytes(rate), checks + [goodput])
    communication = predict(workers, workers, link, fraction, emulation_for(calibration, workers, rate), tensors,
                            calibration["fitted"])
    return communication, step_time(lockstep, communication, MEASURED, overlap=0.0)


def measure(args):
    """Runs every configuration: a point each, with its measurements under "runs"."""
    points = []
    for rate in args.rates.split(","):
        for workers in map(int, args.workers.split(",")):
            with EmulatedCluster(cluster_job.hosts_for(workers, workers), rate,
                                 switch_queue=SWITCH_BUFFER_BYTES) as cluster:
                goodput = cluster_job.measure_link(cluster, "w0", "s0", check_bytes(rate))
                runs = {s: run_training(cluster, s, args.model, workers, workers, args.batch, args.steps, args.warmup)
                        for s in ("lockstep", "bps")}
            measured = runs["bps"]["median_step_s"]
            points.append({"workers": workers, "servers": workers, "rate": rate, "case": args.model,
                           "lockstep_s": runs["lockstep"]["median_step_s"], "measured_s": measured,
                           "min_s": min(runs["bps"]["step_s"]), "max_s": max(runs["bps"]["step_s"]),
                           "goodput_bytes_s": goodput, "runs": runs})
    return points


def main():
    args = parse_args()
    calibration = json.loads(Path(args.calibration).read_text())
    saved = json.loads(Path(args.saved).read_text()) if args.saved else None
    points = saved["points"] if saved else measure(args)
    for point in points:
        communication, predicted = predicted_step(calibration, point["workers"], point["rate"],
                                                  point["goodput_bytes_s"],
                                                  point["runs"]["bps"]["gradient_tensor_bytes"], point["lockstep_s"])
        point.update(communication_s=communication, predicted_s=predicted, error=predicted / point["measured_s"] - 1)
        print(f"{point['workers']} workers {point['rate']}: lockstep {point['lockstep_s'] * 1e3:.0f} ms, bps "
              f"{point['measured_s'] * 1e3:.0f} ms, predicted {predicted * 1e3:.0f} ms ({point['error']:+.1%})",
              flush=True)
    model, batch = (saved["model"], saved["batch"]) if saved else (args.model, args.batch)
    save_result(args.output, {"benchmark": "step_model_training", "model": model, "batch": batch,
                              "calibration": args.calibration, "points": points,
                              "machine": saved["machine"] if saved else describe_machine()})


if __name__ == "__main__":
    main()
