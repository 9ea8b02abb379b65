"""Smoke runs of the benchmarks (benchmarks/, docs/performance.md): tiny sizes, so they check that the
benchmarks still run and produce their files, never how fast anything is."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmarks.lib import netns
from bps_tf.launcher import allocator
from testing.jobs import REPO_ROOT, clean_env

can_make_namespaces = os.geteuid() == 0 and shutil.which("ip") and shutil.which("tc")


def run_module(module, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=REPO_ROOT, env=clean_env(),
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.timeout(120)
def test_loopback_push_pull_benchmark_plot_and_page_table(tmp_path):
    out = tmp_path / "performance" / "loopback.json"
    done = run_module("benchmarks.push_pull_loopback", "--workers", 2, "--servers", 1, "--sizes", "4096,65536",
                      "--budget-mb", 0.1, "--timeout", 90, "--output", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [row["bytes"] for row in result["results"]] == [4096, 65536]
    assert all(row[k]["median_s"] > 0 for row in result["results"] for k in ("bps_tf", "bps_core", "tf_ring"))
    # TF's ring runs in a job of its own with glibc's malloc, bps_tf with bpslaunch's default
    assert result["ring_env"]["BYTEPS_ALLOCATOR"] == "system" and "BYTEPS_ALLOCATOR" not in result["env"]
    assert result["ring_malloc"] == (os.environ.get("LD_PRELOAD") or "glibc")
    assert result["job_malloc"] == (os.environ.get("LD_PRELOAD") or allocator.find_jemalloc() or "glibc")
    assert "| 64 KB |" in done.stdout
    plotted = run_module("benchmarks.report.plots", tmp_path / "performance", timeout=60)
    assert plotted.returncode == 0, plotted.stderr[-3000:]
    assert (tmp_path / "performance" / "loopback.png").stat().st_size > 0
    page = tmp_path / "page.md"
    page.write_text("Loopback (loopback.json, plot: loopback.png)\n\n| stale |\n|---|\n| 1 |\n\nafter\n")
    rewritten = run_module("benchmarks.report.doc_tables", page, timeout=60)
    assert rewritten.returncode == 0, rewritten.stderr[-3000:]
    text = page.read_text()
    assert "stale" not in text and "| 64 KB |" in text and text.endswith("\nafter\n"), text


@pytest.mark.skipif(not can_make_namespaces, reason="needs root, ip and tc")
def test_emulated_cluster_is_deleted_even_on_failure():
    def ours():
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return [line for line in listing.splitlines() if line.startswith(f"{netns.PREFIX}{os.getpid()}-")]

    with pytest.raises(ZeroDivisionError):
        with netns.EmulatedCluster(["a", "b"], rate="100mbit") as cluster:
            assert len(ours()) == 3  # two hosts and the switch
            ping = subprocess.run(["ip", "netns", "exec", cluster.namespace("a"), sys.executable, "-c",
                                   f"import socket; socket.create_connection(('{cluster.address('b')}', 9), 1)"],
                                  capture_output=True, text=True)
            assert "refused" in ping.stderr.lower()  # b is reachable (nothing listens), so the RST comes back
            1 / 0
    assert ours() == []


@pytest.mark.skipif(not can_make_namespaces, reason="needs root, ip and tc")
@pytest.mark.timeout(120)
def test_emulated_cluster_push_pull_benchmark(tmp_path):
    out = tmp_path / "cluster.json"
    done = run_module("benchmarks.push_pull_cluster", "--workers", 2, "--servers", 1, "--rate", "1gbit",
                      "--sizes", "65536", "--budget-mb", 0.1, "--timeout", 90, "--output", out, timeout=110)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["bounds"]["tcp_goodput_bytes_s"] > 0 and result["results"][0]["bytes"] == 65536


@pytest.mark.skipif(not can_make_namespaces, reason="needs root, ip and tc")
@pytest.mark.timeout(300)
def test_time_to_accuracy_benchmark_table_and_plot(tmp_path):
    out = tmp_path / "performance" / "accuracy.json"
    done = run_module("benchmarks.time_to_accuracy", "--workers", 2, "--servers", 1, "--rate", "1gbit",
                      "--variants", "mwms;onebit", "--target", 0.5, "--max-epochs", 2, "--output", out, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["variant"] for r in result["runs"]] == ["mwms", "onebit"]
    assert all(r["curve"] and r["curve"][0]["steps"] > 0 for r in result["runs"])
    assert "BytePSStrategy, onebit" in done.stdout
    plotted = run_module("benchmarks.report.plots", tmp_path / "performance", timeout=60)
    assert plotted.returncode == 0, plotted.stderr[-3000:]
    assert (tmp_path / "performance" / "accuracy.png").stat().st_size > 0


@pytest.mark.timeout(300)
def test_onebit_adam_ablation_runs_every_variant(tmp_path):
    out = tmp_path / "onebit_adam.json"
    done = run_module("benchmarks.ablations.onebit_adam", "--max-epochs", 1, "--output", out, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = json.loads(out.read_text())["runs"]
    assert [r["variant"] for r in runs] == ["exact", "onebit", "onebit, exact second moment",
                                           "onebit, a scale per 256 elements"]
    assert all(r["curve"][0]["steps"] == 11 for r in runs)  # 1437 training images, batch 128


def test_onebit_adam_encoding_matches_numpy():
    import numpy as np
    import tensorflow as tf

    from benchmarks.ablations.onebit_adam import onebit

    value = np.random.default_rng(0).standard_normal((20, 30)).astype(np.float32)
    value[0, :3] = -0.25  # fed values of zero go as +scale, as in the core's codec
    residual = np.full_like(value, 0.25)
    for block, starts in ((None, []), (256, [256, 512])):
        sent, left = onebit(tf, tf.constant(value), tf.constant(residual), block)
        fed = (value + residual).ravel()
        want = np.concatenate([np.where(b < 0, -1, 1) * np.abs(b).mean() for b in np.split(fed, starts)])
        np.testing.assert_allclose(sent.numpy().ravel(), want, rtol=1e-6)
        np.testing.assert_allclose((sent + left).numpy().ravel(), fed, atol=1e-6)


@pytest.mark.timeout(300)
def test_synthetic_benchmark_times_fit_calls_of_their_own(tmp_path):
    """--fit-calls: each round is a fit() call, timed whole; the warm-up call is left out."""
    out = tmp_path / "calls.json"
    done = run_module("benchmarks.synthetic_benchmark", "--smoke", "--models", "mlp", "--precisions", "float32",
                      "--setups", "keras", "bps", "--steps", 2, "--rounds", 2, "--fit-calls", "--json", out,
                      timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["setup"], r["fit_calls"]) for r in rows] == [("keras", True), ("bps", True)]
    assert all(len(rounds) == 2 and min(rounds) > 0 for r in rows for rounds in r["rounds"])


@pytest.mark.timeout(400)
def test_synthetic_training_benchmark_and_its_example(tmp_path):
    """Tiny models on the CPU: plain Keras, BytePSStrategy (2 workers through a server) and the Horovod API,
    each a real job; then the example users start with bpslaunch."""
    out = tmp_path / "synthetic.json"
    done = run_module("benchmarks.synthetic_benchmark", "--smoke", "--models", "resnet50", "--precisions", "float32",
                      "--setups", "keras", "bps_shared", "horovod", "--steps", 3, "--rounds", 1, "--json", out,
                      timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["setup"], r["processes"], r["fit_calls"]) for r in rows] == [
        ("keras", 1, False), ("bps_shared", 2, False), ("horovod", 1, False)]
    assert all(r["total_rate"] > 0 and r["unit"] == "images/s" for r in rows)
    example = subprocess.run([sys.executable, "-m", "bps_tf.launcher", "--local", "--workers", "2", "--servers", "1", "--", sys.executable,
                              str(REPO_ROOT / "examples" / "synthetic_benchmark.py"), "--model", "bert", "--layers",
                              "1", "--width", "64", "--batch-size", "2", "--num-batches-per-iter", "3",
                              "--num-iters", "1"], cwd=REPO_ROOT, env=clean_env(), capture_output=True, text=True,
                             timeout=240)
    assert example.returncode == 0, example.stdout[-3000:] + example.stderr[-3000:]
    assert "tokens/s on 2 workers" in example.stdout, example.stdout[-3000:]


@pytest.mark.timeout(240)
def test_elastic_recovery_benchmark_on_loopback(tmp_path):
    """2 workers through 2 servers on this host: worker 1 killed and started again, then server 1, then the
    scheduler; the commit-cost segments, the result file and its plot."""
    out = tmp_path / "elastic.json"
    done = run_module("benchmarks.elastic_recovery", "--local", "--workers", 2, "--servers", 2, "--kills", "1,s1,sched",
                      "--segment-steps", 10, "--rounds", 1, "--commit-settings", "none,1,5", "--warmup-s", 2,
                      "--settle-s", 2, "--timeout", 200, "--output", out, timeout=230)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["kills"] == [1, "s1", "sched"]
    worker, server, scheduler = result["recovery"]["kills"]
    assert worker["worker"] == 1 and [s["worker"] for s in worker["survivors"]] == [0]
    assert worker["survivors"][0]["size_after"] in (1, 2) and worker["restart"]["rank_after"] == 1
    # every worker survives a server's loss and steps with the other server; the restarted one is taken back
    assert server["server"] == 1 and [s["worker"] for s in server["survivors"]] == [0, 1]
    assert all(s["servers_after"] == 1 and s["size_after"] == 2 for s in server["survivors"])
    restart = server["restart"]
    assert 0 < restart["process_started_s"] < restart["first_step_s"], restart
    assert restart["steps_with_fewer_servers"] >= 1 and restart["join_pause_s"] is not None
    assert result["recovery"]["server_kills"]["all_next_step_s"] == [s["next_step_s"] for s in server["survivors"]]
    assert result["recovery"]["all_next_step_s"] == [worker["survivors"][0]["next_step_s"]]
    # every worker goes on through the scheduler's loss, with every server, once the new one rebuilt the job
    assert scheduler["scheduler"] == 0 and [s["worker"] for s in scheduler["survivors"]] == [0, 1]
    assert all(s["servers_after"] == 2 and s["size_after"] == 2 for s in scheduler["survivors"])
    assert 0 < scheduler["restart"]["process_started_s"] < scheduler["restart"]["first_step_s"], scheduler
    assert result["recovery"]["scheduler_kills"]["all_next_step_s"] == [s["next_step_s"]
                                                                        for s in scheduler["survivors"]]
    assert result["launcher_restarts"] == 3
    assert [c["setting"] for c in result["commit_costs"]] == ["none", "1", "5"]
    assert all(c["steps"] == 9 for c in result["commit_costs"])
    assert [c["commits"] for c in result["commit_costs"]] == [0, 10, 2]
    assert max(result["throughput"]["workers"]) == 2 and sum(result["throughput"]["samples_per_s"]) > 0
    assert all(f"| kill -9 of {role} |" in done.stdout for role in ("worker", "server", "scheduler"))
    assert "batches_per_commit=5" in done.stdout
    assert out.with_suffix(".png").stat().st_size > 0
    out.with_suffix(".png").unlink()  # the plot again from the result file alone, as benchmarks/README.md says
    plotted = run_module("benchmarks.report.elastic_plots", out, timeout=60)
    assert plotted.returncode == 0, plotted.stderr[-3000:]
    assert out.with_suffix(".png").stat().st_size > 0 and "wrote" in plotted.stdout


def plot(folder):
    """benchmarks.report.plots over `folder`: a PNG next to each of its result files."""
    plotted = run_module("benchmarks.report.plots", folder, timeout=60)
    assert plotted.returncode == 0, plotted.stderr[-3000:]


def crossed_the_link(run):
    """Whether worker 0's link carried about its gradients each step (a ring of 2 sends M, a push M)."""
    return run["sent_bytes_per_step"] > 0.9 * run["gradient_bytes"]


@pytest.mark.skipif(not can_make_namespaces, reason="needs root, ip and tc")
@pytest.mark.timeout(120)
def test_train_cluster_benchmark_table_and_plot(tmp_path):
    """Keras fit of the small MLP, 2 steps after 1, under MWMS and BytePSStrategy: 2 workers, 1 server."""
    out = tmp_path / "train.json"
    done = run_module("benchmarks.train_cluster", "--workers", 2, "--servers", 1, "--rate", "1gbit", "--models",
                      "mlp-small", "--batch-mlp", 8, "--strategies", "mwms,bps", "--steps", 2, "--warmup", 1,
                      "--output", out, timeout=110)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["variant"] for r in result["runs"]] == ["mwms", "bps"]
    for run in result["runs"]:
        assert len(run["step_s"]) == 2 and run["median_step_s"] > 0 and run["samples_per_s"] > 0, run
        assert run["global_batch"] == 16 and crossed_the_link(run), run
    assert "| mlp-small | BytePSStrategy | 8.4 |" in done.stdout, done.stdout[-3000:]
    plot(tmp_path)
    assert out.with_suffix(".png").stat().st_size > 0


@pytest.mark.skipif(not can_make_namespaces, reason="needs root, ip and tc")
@pytest.mark.timeout(120)
def test_tuning_cluster_benchmark_variants_and_plot(tmp_path):
    """The defaults and "no priority" (the command's own replacement of the priorities), then the defaults
    again: 2 workers, 1 server, the small MLP."""
    out = tmp_path / "tuning.json"
    done = run_module("benchmarks.tuning_cluster", "--workers", 2, "--servers", 1, "--rate", "1gbit", "--models",
                      "mlp-small", "--batch-mlp", 8, "--variants", "0,2", "--steps", 2, "--warmup", 1,
                      "--output", out, timeout=110)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = json.loads(out.read_text())["runs"]
    defaults = "defaults (priority, credit auto, 4 MB partitions)"
    assert [(r["variant"], r["no_priority"]) for r in runs] == [(defaults, False), ("no priority", True),
                                                                (defaults, False)]
    assert all(r["median_step_s"] > 0 and crossed_the_link(r) for r in runs), runs
    assert "| mlp-small | no priority |" in done.stdout, done.stdout[-3000:]
    plot(tmp_path)
    assert out.with_suffix(".png").stat().st_size > 0


@pytest.mark.skipif(not can_make_namespaces, reason="needs root, ip and tc")
@pytest.mark.timeout(60)
def test_link_trace_benchmark_and_plot(tmp_path):
    """Two push_pulls of 8 MiB: the worker host's link sends them at about the link's rate. (With 1 worker the
    server's replies are echoes without payload in the current core, so the worker's link receives no sums.)"""
    out = tmp_path / "link_trace.json"
    done = run_module("benchmarks.link_trace", "--rate", "1gbit", "--bytes", 8 << 20, "--rounds", 2, "--output", out,
                      timeout=50)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    samples = result["samples"]
    since = [b["t_s"] - a["t_s"] for a, b in zip([{"t_s": 0.0}] + samples, samples)]
    sent_mb = sum(r["sent_mb_s"] * s for r, s in zip(samples, since))
    assert 0.95 * 2 * 8.39 < sent_mb < 1.5 * 2 * 8.39, sent_mb
    assert result["busy_intervals"] >= 5 and max(r["sent_mb_s"] for r in samples) > 50, result["busy_intervals"]
    assert f"{result['busy_intervals']} busy intervals of 10 ms" in done.stdout
    plot(tmp_path)
    assert out.with_suffix(".png").stat().st_size > 0


@pytest.mark.timeout(90)
def test_allocator_faults_benchmark_smoke(tmp_path):
    out = tmp_path / "allocator_faults.json"
    done = run_module("benchmarks.allocator_faults", "--smoke", "--repeats", 1, "--json", out, timeout=80)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["onednn"], r["bfc"]) for r in rows] == [(True, True), (True, False), (False, True), (False, False)]
    assert all(r["ms_per_step"] > 0 and r["faults_per_step"] >= 0 for r in rows), rows
    assert "| off | false |" in done.stdout, done.stdout


@pytest.mark.skipif(not can_make_namespaces, reason="needs root, ip and tc")
@pytest.mark.timeout(90)
def test_step_model_validation_benchmark_refit_and_plot(tmp_path):
    """2 workers and 2 servers at 1 Gbit/s (every case a calibration case), then the fit again with --from."""
    out = tmp_path / "step_model_validation.json"
    done = run_module("benchmarks.step_model_validation", "--configs", "2x2", "--rates", "1gbit", "--output", out,
                      timeout=80)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    (config,) = result["configs"]
    measured = config["rates"]["1gbit"]
    assert measured["goodput_bytes_s"] > 50e6 and config["emulation"]["message_s"] > 0
    assert set(measured["cases"]) == {f"single{n}" for n in (4096, 1 << 20, 4 << 20, 16 << 20, 64 << 20)} | {
        "bert_like"}
    assert 0.5 < result["goodput_fraction"]["1gbit"] < 1.05 and result["fitted"]["duplex_fraction"] > 0
    assert len(result["points"]) == 5 and all(p["calibration"] and p["predicted_s"] > 0 for p in result["points"])
    assert result["summary"]["predicted"] == 0 and "predicted cases: 0 of 0" in done.stdout
    again = tmp_path / "again" / "step_model_validation.json"
    refit = run_module("benchmarks.step_model_validation", "--from", out, "--output", again, timeout=60)
    assert refit.returncode == 0, refit.stderr[-3000:]
    assert json.loads(again.read_text())["fitted"] == pytest.approx(result["fitted"])
    plot(tmp_path)
    assert out.with_suffix(".png").stat().st_size > 0


@pytest.mark.skipif(not can_make_namespaces, reason="needs root, ip and tc")
@pytest.mark.timeout(90)
def test_step_model_training_benchmark_with_the_recorded_calibration(tmp_path):
    """2 workers at 1 Gbit/s, the small MLP for 2 steps after 1, calibrated by docs/performance's validation run;
    then the predictions again with --from, and its plot beside that run's."""
    recorded = REPO_ROOT / "docs" / "performance" / "step_model_validation.json"
    folder = tmp_path / "performance"
    folder.mkdir()
    shutil.copy(recorded, folder)
    out = folder / "step_model_training.json"
    done = run_module("benchmarks.step_model_training", "--workers", 2, "--rates", "1gbit", "--batch", 8, "--steps", 2,
                      "--warmup", 1, "--calibration", recorded, "--output", out, timeout=80)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (point,) = json.loads(out.read_text())["points"]
    assert (point["workers"], point["servers"], point["rate"], point["case"]) == (2, 2, "1gbit", "mlp-small")
    assert point["lockstep_s"] > 0 and point["communication_s"] > 0 and point["measured_s"] > 0
    assert point["predicted_s"] > point["lockstep_s"] and point["goodput_bytes_s"] > 50e6
    assert crossed_the_link(point["runs"]["bps"]) and point["runs"]["lockstep"]["sent_bytes_per_step"] < 1e6
    assert "2 workers 1gbit: lockstep" in done.stdout
    again = tmp_path / "again.json"
    predicted = run_module("benchmarks.step_model_training", "--from", out, "--calibration", recorded, "--output",
                           again, timeout=60)
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    (repeated,) = json.loads(again.read_text())["points"]
    assert repeated["predicted_s"] == pytest.approx(point["predicted_s"]) and repeated["runs"] == point["runs"]
    plot(folder)
    assert (folder / "step_model_validation.png").stat().st_size > 0


@pytest.mark.timeout(60)
def test_scaling_predictions_and_plot(tmp_path):
    from benchmarks.scaling_predictions import GPUS, SENSITIVITY

    out = tmp_path / "scaling_predictions.json"
    done = run_module("benchmarks.scaling_predictions", "--output", out, timeout=50)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert len(result["rows"]) == 2 * 2 * 2 * len(GPUS)  # 2 models, 2 links, with and without XLA
    assert [r["change"] for r in result["sensitivity"]] == list(SENSITIVITY)
    for r in result["rows"] + result["sensitivity"]:
        assert 0 < r["bps_efficiency"] <= 1 and 0 < r["ring_efficiency"] <= 1 and r["bps_communication_s"] > 0, r
    assert "256 GPUs, BERT-large, 100 Gbit/s, as predicted" in done.stdout
    plot(tmp_path)
    assert out.with_suffix(".png").stat().st_size > 0


@pytest.mark.timeout(120)
def test_gpu_strategy_bench_smoke_on_the_cpu(tmp_path):
    """Its --smoke models on the CPU (no GPU here): MirroredStrategy, and BytePSStrategy through a server in a
    bps_tf job of its own; what it measures needs a GPU machine (docs/gpu.md)."""
    out = tmp_path / "strategy_bench.json"
    done = run_module("benchmarks.gpu_strategy_bench", "--smoke", "--gpus", 1, "--models", "mlp", "--modes",
                      "mirrored", "bps_server", "--steps", 3, "--warmup", 1, "--json", out, timeout=110)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [(r["mode"], r["gpus"], r["replicas"]) for r in rows] == [("mirrored", 1, 1), ("bps_server", 1, 1)]
    assert all(len(r["ms_per_step"]) == 3 and min(r["ms_per_step"]) > 0 and r["parameters"] > 0 for r in rows)
    assert "| mlp | 0.1M | 1 | bps_server |" in done.stdout, done.stdout


@pytest.mark.timeout(60)
def test_gpu_compute_step_arguments_and_timing(tmp_path):
    """Its steps need PyTorch or JAX on a GPU: here its arguments, its timing loop, and a case that cannot run
    recorded in its result file (the others would still run)."""
    from benchmarks.gpu_compute_step import time_steps

    calls = []
    seconds = time_steps(lambda: calls.append("step"), lambda: calls.append("sync"), steps=3, warmup=2)
    assert calls == ["step", "step", "sync"] + ["step", "sync"] * 3 and len(seconds) == 3
    assert all(s >= 0 for s in seconds)
    usage = run_module("benchmarks.gpu_compute_step", "--help", timeout=30)
    assert usage.returncode == 0 and "--cases" in usage.stdout, usage.stderr[-3000:]
    out = tmp_path / "compute_step.json"
    failed = run_module("benchmarks.gpu_compute_step", "--cases", "bert_large/none", "--json", out, timeout=30)
    assert failed.returncode == 1, failed.stderr[-3000:]
    (row,) = json.loads(out.read_text())["runs"]
    assert row["model"] == "bert_large" and row["framework"] == "none" and "KeyError" in row["error"]


can_profile = shutil.which("perf") and subprocess.run(["perf", "stat", "-e", "cpu-clock", "true"],
                                                      capture_output=True).returncode == 0


@pytest.mark.timeout(120)
def test_fused_messages_benchmark_counts_fewer_messages_with_fusion():
    done = run_module("benchmarks.fused_messages", "--runs", 1, "--steps", 2, timeout=100)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["planner"] for line in lines if "planner" in line] == [{"unfused": 271, "fused": 150},
                                                                          {"unfused": 124, "fused": 3}]
    runs = [line for line in lines if "planner" not in line]
    assert len(runs) == 2 * 2 * 2  # all and small tensors, fusion off and on, 2 workers
    for line in runs:
        unfused = 271 if line["tensors"] == 196 else 124
        assert line["messages_received"] == line["messages_sent"] and line["step_ms"] > 0, line
        assert (line["messages_sent"] == unfused) if line["fusion"] == 0 else (line["messages_sent"] <= unfused), line


@pytest.mark.timeout(300)
def test_tcp_io_threads_benchmark_measures_the_kernel_and_each_thread_count():
    done = run_module("benchmarks.tcp_io_threads", "--runs", 1, "--workers", 2, "--bytes", 1 << 20, "--rounds", 3,
                      "--floor-messages", 50, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    run, median = lines[0], lines[-1]["median"]
    assert run["kernel_tcp"]["cpu_ns_per_byte"] > 0 and run["kernel_tcp"]["bytes_per_cpu_s"] > 0, run
    assert sorted(run["server"]) == ["1", "2", "4"] and run["server"]["1"]["ratio"] == 1.0, run
    assert all(measured["bytes_per_s"] > 0 for measured in run["server"].values()), run
    assert median["server_ratio"]["1"] == 1.0 and median["kernel_tcp_cpu_ns_per_byte"] > 0, median


@pytest.mark.timeout(300)
def test_message_cost_benchmark_counts_messages_and_compares_with_the_floor(tmp_path):
    """2 sizes, 8 tensors in flight, 2 rounds (the profile where perf works): the floor's and the job's CPU,
    the push_pulls checked against the bytes the worker pushed, the ratios from the same rounds."""
    out = tmp_path / "message_cost.json"
    done = run_module("benchmarks.message_cost", "--sizes", "4096,262144", "--tensors", 8, "--messages", 800,
                      "--budget-mb", 64, "--rounds", 2, *(["--profile"] if can_profile else []), "--timeout", 240,
                      "--output", out, timeout=290)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["messages"] == {"4096": 800, "262144": 256}
    assert result["job_malloc"] == (allocator.find_jemalloc() or "glibc")  # bpslaunch's choice
    assert [(r["round"], r["bytes"]) for r in result["rounds"]] == [(0, 4096), (0, 262144), (1, 4096), (1, 262144)]
    for r in result["rounds"]:
        floor, job = r["floor"], r["job"]
        assert [floor[k]["in_flight"] for k in ("one_at_a_time", "in_flight")] == [1, 8]
        assert all(floor[k]["messages"] == job["push_pulls"] and floor[k]["server_cpu_s"] > 0 for k in floor)
        assert job["bytes_pulled"] == 0  # a single worker's sums come back as echoes, without payload
        assert job["cpu_s"]["server"] > 0 and job["cpu_s"]["worker"] > 0, job
        assert job["job_cpu_us_per_message_end"] * 2 == pytest.approx(job["job_cpu_us_per_push_pull"])
        assert job["server_sleeps_per_message"] >= 0 and job["server_preemptions_per_message"] >= 0, job
        assert job["worker_sleeps_per_push_pull"] > 0, job  # at least the waits for the replies
    for s in result["summary"]:
        for figure in ("server_over_floor", "job_over_floor", "server_cpu_us_per_message"):
            assert 0 < s[figure]["best"] <= s[figure]["median"] <= s[figure]["worst"], s
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [line["kind"] for line in lines].count("job") == 4 and "| 256 KB |" in done.stdout
    if can_profile:
        for profile in result["profiles"]:
            assert profile["samples"] > 0 and profile["top"], profile
            assert sum(profile["concerns"].values()) == pytest.approx(100, abs=1), profile["concerns"]


def test_message_cost_profile_puts_symbols_in_their_concerns():
    from benchmarks.lib.perf_profile import concern_of

    assert concern_of("[kernel.kallsyms] [k] _copy_to_iter") == "copies"
    assert concern_of("[kernel.kallsyms] [k] tcp_recvmsg_locked") == "syscalls and kernel TCP"
    assert concern_of("libc.so.6 [.] __libc_recv") == "syscalls and kernel TCP"
    assert concern_of("[kernel.kallsyms] [k] finish_task_switch.isra.0").startswith("locking")
    assert concern_of("libc.so.6 [.] pthread_mutex_lock@@GLIBC_2.2.5").startswith("locking")
    assert concern_of("libc.so.6 [.] _int_malloc") == concern_of("libc.so.6 [.] cfree@GLIBC_2.2.5") == "allocation"
    assert concern_of("libbps_core.so [.] bps::Message::Decode") == "frame parsing and encoding"
    string = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"
    assert concern_of(f"libstdc++.so.6 [.] {string}::_M_append") == "frame parsing and encoding"
    assert concern_of(f"libstdc++.so.6 [.] {string}::_M_mutate") == "allocation"
    assert concern_of("python3.11 [.] _PyEval_EvalFrameDefault").startswith("Python")
    assert concern_of("libpython3.11.so.1.0 [.] PyUnicode_DecodeUTF8").startswith("Python")
    assert concern_of(f"libbps_core.so [.] std::_Function_handler<void (), bps::TcpTransport::Send(int, {string}, "
                      "void const*)::{lambda()#1}>::_M_invoke").startswith("dispatch")
    assert concern_of("libbps_core.so [.] bps::AddToAccumulator") == "summing"
    assert concern_of("libbps_core.so [.] bps::Server::CheckedKey").startswith("dispatch")
    assert concern_of("[vdso] [.] __vdso_clock_gettime") == "other"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("keras_name, workers, baseline", [("keras", "1,2", False), ("tf_keras", "2", True)])
def test_fit_overhead_benchmark_prints_a_row_per_job(tmp_path, keras_name, workers, baseline):
    """A row per job; with --baseline (here this checkout again) a baseline row after each BytePSStrategy row."""
    out = tmp_path / "fit_overhead.json"
    extra = ("--baseline", REPO_ROOT) if baseline else ()
    done = run_module("benchmarks.fit_overhead", "--keras", keras_name, "--workers", workers, "--steps", 2,
                      "--calls", 1, "--epochs", 2, "--rounds", 1, "--timeout", 240, "--output", out, *extra,
                      timeout=580)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    jobs = [("plain", 1, False), ("mirrored", 1, False)] + [
        ("bps", int(n), b) for n in workers.split(",") for b in ([False, True] if baseline else [False])]
    rows = json.loads(out.read_text())["rows"]
    assert [(row["variant"], row["workers"], row["baseline"]) for row in rows] == jobs
    assert all(row["call_ms"] > 0 and row["epoch_ms"] > 0 and row["step_ms"] > 0 for row in rows)
    labels = ["| plain Keras | 1 |", "| MirroredStrategy (1 CPU) | 1 |"] + [
        f"| BytePSStrategy | {n} |" for n in workers.split(",")]
    if baseline:
        labels += [f"| BytePSStrategy (baseline) | {n} |" for n in workers.split(",")]
    for label in labels:
        assert label in done.stdout, done.stdout
