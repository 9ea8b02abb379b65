"""Smoke runs of the benchmarks (benchmarks/, docs/performance.md): tiny sizes, so they check that the
benchmarks still run and produce their files, never how fast anything is."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmarks.lib import netns
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
    assert [(r["setup"], r["processes"]) for r in rows] == [("keras", 1), ("bps_shared", 2), ("horovod", 1)]
    assert all(r["total_rate"] > 0 and r["unit"] == "images/s" for r in rows)
    example = subprocess.run([sys.executable, "-m", "bps_tf.launcher", "--local", "--workers", "2", "--servers", "1", "--", sys.executable,
                              str(REPO_ROOT / "examples" / "synthetic_benchmark.py"), "--model", "bert", "--layers",
                              "1", "--width", "64", "--batch-size", "2", "--num-batches-per-iter", "3",
                              "--num-iters", "1"], cwd=REPO_ROOT, env=clean_env(), capture_output=True, text=True,
                             timeout=240)
    assert example.returncode == 0, example.stdout[-3000:] + example.stderr[-3000:]
    assert "tokens/s on 2 workers" in example.stdout, example.stdout[-3000:]


@pytest.mark.timeout(180)
def test_elastic_recovery_benchmark_on_loopback(tmp_path):
    """2 workers through a server on this host: worker 1 killed and started again, the commit-cost segments,
    the result file and its plot."""
    out = tmp_path / "elastic.json"
    done = run_module("benchmarks.elastic_recovery", "--local", "--workers", 2, "--servers", 1, "--kills", 1,
                      "--segment-steps", 10, "--rounds", 1, "--commit-settings", "none,1,5", "--warmup-s", 2,
                      "--settle-s", 2, "--timeout", 140, "--output", out, timeout=170)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    (kill,) = result["recovery"]["kills"]
    assert kill["worker"] == 1 and [s["worker"] for s in kill["survivors"]] == [0]
    assert kill["survivors"][0]["size_after"] in (1, 2) and kill["restart"]["rank_after"] == 1
    assert result["launcher_restarts"] == 1
    assert [c["setting"] for c in result["commit_costs"]] == ["none", "1", "5"]
    assert all(c["steps"] == 9 for c in result["commit_costs"])
    assert [c["commits"] for c in result["commit_costs"]] == [0, 10, 2]
    assert max(result["throughput"]["workers"]) == 2 and sum(result["throughput"]["samples_per_s"]) > 0
    assert "| kill -9 of worker |" in done.stdout and "batches_per_commit=5" in done.stdout
    assert out.with_suffix(".png").stat().st_size > 0
