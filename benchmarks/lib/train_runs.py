"""One end-to-end training run on an emulated cluster: N copies of workers/train.py, as a bps_tf job
(BytePSStrategy), as a TF job (MultiWorkerMirroredStrategy), or as N independent processes that do not
communicate at all (the step time communication adds to). Shared by train_cluster.py and tuning_cluster.py."""

import json
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.lib import cluster_job

LEGACY_KERAS = {"TF_USE_LEGACY_KERAS": "1"}  # MultiWorkerMirroredStrategy needs tf-keras; both use it


def add_training_arguments(parser):
    """The cluster, models and step counts that every training benchmark takes."""
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--rate", default="1gbit", help="each host's link, each direction (tc syntax)")
    parser.add_argument("--models", default="bert,mlp")
    parser.add_argument("--batch-bert", type=int, default=8, help="per-worker batch of the BERT-like model")
    parser.add_argument("--batch-mlp", type=int, default=32, help="per-worker batch of the MLP")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--output", help="JSON result file (default: print only)")


def run_training(cluster, strategy, model, workers, servers, batch_per_worker, steps, warmup, extra_env=(),
                 no_priority=False, sparse_as_dense=False, colocate=False, timeout=900):
    """Returns workers/train.py's result of rank 0 (local: of every process, step times pooled)."""
    env = dict(LEGACY_KERAS, **dict(extra_env))
    with tempfile.TemporaryDirectory() as logs:
        out = lambda i: str(Path(logs) / f"result{i}.json")
        argv = lambda i: [sys.executable, "-m", "benchmarks.workers.train", "--strategy", strategy, "--model", model,
                          "--batch-per-worker", str(batch_per_worker), "--steps", str(steps), "--warmup",
                          str(warmup), "--workers", str(workers), "--output", out(i),
                          "--tf-cluster", cluster_job.tf_cluster(cluster, workers)] + (
                             ["--no-priority"] if no_priority else []) + (
                             ["--sparse-as-dense"] if sparse_as_dense else [])
        if strategy in ("bps", "lockstep"):
            cluster_job.run_job(cluster, workers, servers, argv, logs, env, timeout, colocate)
        else:
            cluster_job.run_plain(cluster, workers, argv, logs, env, timeout)
        results = [json.loads(Path(out(i)).read_text()) for i in range(workers) if Path(out(i)).exists()]
    result = results[0]
    if strategy == "local":  # N processes, each its own time: pool them
        result["step_s"] = [s for r in results for s in r["step_s"]]
    result["env"] = dict(extra_env)
    result["median_step_s"] = statistics.median(result["step_s"])
    result["samples_per_s"] = result["global_batch"] / result["median_step_s"]
    return result
