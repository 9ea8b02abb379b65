"""The step model (bps_tf.plan) against push_pull on the emulated cluster, calibrated in the same run.

For each configuration WORKERSxSERVERS: first the same hosts on unlimited links (the machine's capacity and
its cost per message: benchmarks/lib/step_model_fit.py), then on each rate the link's TCP goodput
(workers/link_check.py), push_pulls of single tensors and of the BERT-like model's 68 gradients started
together (workers/core_push_pull.py: NumPy API, no compute), and the packets the links' rate limiters
dropped. Measured, not fitted: the links' goodput (the best link check of the run at that rate: every link
has the same limits), the machine's parameters per configuration (the mean over the run's rounds), the call
time of a 4 KB push_pull in the same run. The model's one fitted parameter (the links' efficiency with push
and pull at once) comes from the 2-worker cases; every other case is predicted from it.

python -m benchmarks.step_model_validation --configs 2x2,4x4,8x8,8x4 --rates 1gbit,100mbit --rounds 2 \\
    --output docs/performance/step_model_validation.json

The fit and the predictions again from a saved result's measurements (nothing measured; --output rewrites them):

python -m benchmarks.step_model_validation --from docs/performance/step_model_validation.json \\
    --output docs/performance/step_model_validation.json
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.lib import cluster_job
from benchmarks.lib.measure import rate_bytes_per_s
from benchmarks.lib.netns import EmulatedCluster
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.lib.step_model_fit import (SWITCH_BUFFER_BYTES, bert_like_tensors, emulation_parameters,
                                           fit_duplex, link_goodput_fraction, predict)

SIZES = {"1gbit": [1 << 20, 4 << 20, 16 << 20, 64 << 20], "100mbit": [1 << 20, 4 << 20, 16 << 20]}
TINY = "+".join(["4096"] * 64)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="2x2,4x4,8x8,8x4", help="WORKERSxSERVERS, comma-separated")
    parser.add_argument("--rates", default="1gbit,100mbit")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every configuration this many times")
    parser.add_argument("--from", dest="saved", help="a saved result: fit and predict from its measurements")
    parser.add_argument("--output")
    return parser.parse_args()


def run_cases(cluster, workers, servers, sizes, sets, budget_mb, logs):
    out = Path(logs) / "cases.json"
    argv = lambda i: [sys.executable, "-m", "benchmarks.workers.core_push_pull", "--sizes", ",".join(map(str, sizes)),
                      "--tensor-sets", sets, "--budget-mb", str(budget_mb), "--output", str(out)]
    cluster_job.run_job(cluster, workers, servers, argv, logs, {}, 900)
    rows = json.loads(out.read_text())["results"]
    return {("single" + str(r["bytes"]) if r["case"] == "single" else r["case"]): r["bps_core"] for r in rows}


def queue_drops(cluster):
    """Packets the links' rate limiters dropped so far (their queues overflowed), summed over the switch's
    ports (what hosts receive) and over the hosts' own links (what they send)."""
    def dropped(namespace):
        shown = subprocess.run(["ip", "netns", "exec", namespace, "tc", "-s", "qdisc", "show"], capture_output=True,
                               text=True, timeout=30).stdout
        return sum(int(n) for n in re.findall(r"dropped (\d+)", shown))
    return {"switch_ports": dropped(cluster.namespace("switch")),
            "hosts": sum(dropped(cluster.namespace(h)) for h in cluster.hosts)}


def measure_config(workers, servers, rates):
    hosts = cluster_job.hosts_for(workers, servers)
    with tempfile.TemporaryDirectory() as logs:
        with EmulatedCluster(hosts, None) as cluster:
            unlimited = run_cases(cluster, workers, servers, [4096, 64 << 20], f"tiny64={TINY}", 512, logs)
        emulation = emulation_parameters(workers, servers, {k: v["median_s"] for k, v in unlimited.items()})
        measured = {}
        for rate in rates:
            with EmulatedCluster(hosts, rate, switch_queue=SWITCH_BUFFER_BYTES) as cluster:
                goodput = cluster_job.measure_link(cluster, "w0", "s0", check_bytes(rate))
                bert = "+".join(map(str, bert_like_tensors()))
                cases = run_cases(cluster, workers, servers, [4096] + SIZES.get(rate, SIZES["100mbit"]),
                                  f"bert_like={bert}", budget_mb(rate), logs)
                drops = queue_drops(cluster)
            measured[rate] = {"goodput_bytes_s": goodput, "cases": cases, "queue_drops": drops}
            print(f"{workers}x{servers} {rate}: goodput {goodput / 1e6:.1f} MB/s, packets dropped {drops}; " + ", ".join(
                f"{k} {v['median_s'] * 1e3:.1f} ms" for k, v in cases.items()), flush=True)
    return {"workers": workers, "servers": servers, "unlimited": unlimited, "emulation": emulation,
            "rates": measured}


def tensors_of(case):
    return bert_like_tensors() if case == "bert_like" else [int(case[len("single"):])]


def budget_mb(rate):
    """Megabytes each case moves at this rate: 7 calls of 64 MiB at 1 Gbit/s (the most a case takes; 3 calls
    are as few, and one call held up by the shared cores moved their median), 40 at slower rates."""
    return 7 * 64 if rate == "1gbit" else 40


def check_bytes(rate):
    """Bytes of the link check at this rate."""
    return (64 if rate == "1gbit" else 16) << 20


def pooled_emulation(configs, workers, servers):
    """The emulated machine's parameters for WORKERSxSERVERS: the mean over the run's rounds of it (each from
    its own unlimited-link run)."""
    rounds = [c["emulation"] for c in configs if (c["workers"], c["servers"]) == (workers, servers)]
    return {k: statistics.mean(e[k] for e in rounds) for k in rounds[0]}


def predictions(configs):
    """Fits the links' duplex efficiency on the 2-worker cases, then predicts every case of every configuration."""
    goodput = {rate: link_goodput_fraction(rate_bytes_per_s(rate), check_bytes(rate),
                                           [c["rates"][rate]["goodput_bytes_s"] for c in configs if rate in c["rates"]])
               for rate in {rate for c in configs for rate in c["rates"]}}

    machine = {(c["workers"], c["servers"]): pooled_emulation(configs, c["workers"], c["servers"]) for c in configs}

    def cases(config, rate):
        link = rate_bytes_per_s(rate)
        m = config["rates"][rate]
        emulation = dict(machine[config["workers"], config["servers"]], call_s=m["cases"]["single4096"]["median_s"])
        for case, timing in m["cases"].items():
            if case != "single4096":
                yield case, timing, link, goodput[rate], emulation

    fitting = [(t["median_s"], link, g, c["workers"], c["servers"], e, tensors_of(case))
               for c in configs if c["workers"] == 2 for rate in c["rates"] for case, t, link, g, e in cases(c, rate)]
    fitted = fit_duplex(fitting)
    points = []
    for c in configs:
        for rate in c["rates"]:
            for case, timing, link, fraction, emulation in cases(c, rate):
                predicted = predict(c["workers"], c["servers"], link, fraction, emulation, tensors_of(case), fitted)
                points.append({"workers": c["workers"], "servers": c["servers"], "rate": rate, "case": case,
                               "measured_s": timing["median_s"], "min_s": timing["min_s"], "max_s": timing["max_s"],
                               "predicted_s": predicted, "error": predicted / timing["median_s"] - 1,
                               "calibration": c["workers"] == 2})
    return fitted, goodput, points


def summarise(points):
    predicted = [p for p in points if not p["calibration"]]
    return {"predicted": len(predicted), "within_15_percent": sum(abs(p["error"]) <= 0.15 for p in predicted),
            "max_abs_error": max((abs(p["error"]) for p in predicted), default=0.0),
            "calibration_max_abs_error": max(abs(p["error"]) for p in points if p["calibration"])}


def main():
    args = parse_args()
    if args.saved:
        saved = json.loads(Path(args.saved).read_text())
        configs, machine = saved["configs"], saved["machine"]
    else:
        rates = args.rates.split(",")
        configs = []
        for _ in range(args.rounds):
            for spec in args.configs.split(","):
                workers, servers = map(int, spec.split("x"))
                configs.append(measure_config(workers, servers, rates))
        machine = describe_machine()
    fitted, goodput, points = predictions(configs)
    print(f"fitted: duplex_fraction {fitted['duplex_fraction']:.3f}; "
          "links' goodput fraction " + ", ".join(f"{rate} {g:.3f}" for rate, g in goodput.items()))
    for p in points:
        print(f"{p['workers']}x{p['servers']} {p['rate']} {p['case']}: measured {p['measured_s'] * 1e3:.1f} ms, "
              f"predicted {p['predicted_s'] * 1e3:.1f} ms ({p['error']:+.1%}){' (calibration)' * p['calibration']}")
    summary = summarise(points)
    print(f"predicted cases: {summary['within_15_percent']} of {summary['predicted']} within 15%, largest error "
          f"{summary['max_abs_error']:.1%}; calibration cases' largest error {summary['calibration_max_abs_error']:.1%}")
    save_result(args.output, {"benchmark": "step_model_validation", "configs": configs, "fitted": fitted,
                              "goodput_fraction": goodput, "points": points, "summary": summary, "machine": machine})


if __name__ == "__main__":
    main()
