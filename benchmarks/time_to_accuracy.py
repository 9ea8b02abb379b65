"""Time to accuracy with gradient compression on an emulated cluster: the same Keras training of a model (a
wide MLP, or a small BERT-like encoder) on scikit-learn's digits (benchmarks/workers/accuracy.py) under MultiWorkerMirroredStrategy and under
BytePSStrategy with each compression, until a target test accuracy. Reports the steps and the training
time each needed, and plots accuracy over time and over steps.

python -m benchmarks.time_to_accuracy --workers 4 --servers 4 --rate 1gbit \\
    --variants "mwms;none;onebit;onebit,momentum=0.9;topk:0.01;topk:0.01,momentum=0.9" \\
    --output docs/performance/accuracy_w4_s4_1gbit.json
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.lib import cluster_job
from benchmarks.lib.netns import EmulatedCluster
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.lib.train_runs import LEGACY_KERAS
from benchmarks.report.tables import accuracy_table


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--rate", default="1gbit", help="each host's link, each direction (tc syntax)")
    parser.add_argument("--variants", default="mwms;none;onebit;topk:0.01;randomk:0.01",
                        help="separated by ';': mwms, or a BYTEPS_COMPRESSION for BytePSStrategy (none, onebit, "
                             "topk:R, onebit,momentum=0.9, ...)")
    parser.add_argument("--model", choices=["mlp", "encoder"], default="mlp",
                        help="mlp: a wide MLP; encoder: a small BERT-like encoder over the 64 pixels as tokens")
    parser.add_argument("--target", type=float, default=0.96)
    parser.add_argument("--max-epochs", type=int, default=40)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd",
                        help="sgd: momentum 0.9 (in the compression where it has momentum correction); adam")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--output")
    return parser.parse_args()


def run_variant(cluster, args, variant, timeout=1800):
    strategy = "mwms" if variant == "mwms" else "bps"
    env = dict(LEGACY_KERAS)
    if strategy == "bps":
        env["BYTEPS_COMPRESSION"] = variant
    with tempfile.TemporaryDirectory() as logs:
        out = str(Path(logs) / "result.json")
        argv = lambda i: [sys.executable, "-m", "benchmarks.workers.accuracy", "--strategy", strategy,
                          "--model", args.model, "--workers", str(args.workers),
                          "--tf-cluster", cluster_job.tf_cluster(cluster, args.workers),
                          "--target", str(args.target), "--max-epochs", str(args.max_epochs),
                          "--optimizer", args.optimizer, "--learning-rate", str(args.learning_rate),
                          "--output", out]
        if strategy == "bps":
            cluster_job.run_job(cluster, args.workers, args.servers, argv, logs, env, timeout)
        else:
            cluster_job.run_plain(cluster, args.workers, argv, logs, env, timeout)
        result = json.loads(Path(out).read_text())
    result["variant"] = variant
    return result


def main():
    args = parse_args()
    runs = []
    with EmulatedCluster(cluster_job.hosts_for(args.workers, args.servers), args.rate) as cluster:
        for variant in args.variants.split(";"):
            run = run_variant(cluster, args, variant)
            reached = run["reached"]
            print(f"{variant}: " + (f"{reached['accuracy']:.3f} after {reached['steps']} steps, "
                                    f"{reached['train_s']:.1f} s" if reached else "target not reached"), flush=True)
            runs.append(run)
    result = {"benchmark": "time_to_accuracy", "model": args.model, "rate": args.rate, "workers": args.workers,
              "servers": args.servers, "target": args.target, "optimizer": args.optimizer,
              "learning_rate": args.learning_rate, "runs": runs, "machine": describe_machine()}
    print(accuracy_table(result))
    save_result(args.output, result)


if __name__ == "__main__":
    main()
