"""Horovod's elastic TensorFlow 2 examples (Horovod's examples/elastic/tensorflow2) on bps_tf, each in a
3-worker elastic job in which worker 1 is killed with SIGKILL mid-training and started again by bpslaunch
--max-restarts 1: the Keras MNIST example with only the import changed (tf-keras) and with Keras 3's own API
changes, the custom-loop MNIST example and the synthetic benchmark; and a `strategy.run` loop under
BytePSStrategy with TensorFlowKerasState. The workers (tests/workers/elastic_*_example.py,
elastic_strategy_loop.py) log their steps with the job's size, and the restarted worker joins only once the
others trained as a job of 2 (testing.elastic_steps). Every worker must finish, with the same weights as the
others, in a job of 3 again, and the example's own outputs must be there."""

import re
import signal
import time

import pytest

from testing.elastic_jobs import ElasticJob

# Each worker's last line: "rank R: weights <fingerprint> ... size S ...".
END = r"\[worker (\d)\] rank (\d): weights (\w+) (.*)"


def run_with_a_kill(script, args, legacy_keras, kill_when, **env):
    """Runs tests/workers/<script> in an elastic job of 3 (at least 2) workers; kills worker 1 with SIGKILL at
    its first logged step for which kill_when(step) holds. Returns the job's output, the files the workers
    left in the job's directory (name: size) and every worker's logged steps."""
    with ElasticJob(script, args, workers=3, servers=1, min_workers=2, max_workers=3, max_restarts=1,
                    TF_USE_LEGACY_KERAS=legacy_keras, **env) as job:
        started_at = time.time()
        job.wait_for_step(1, kill_when, timeout=150)
        killed_at = job.signal(1, signal.SIGKILL)
        back = job.wait_for_step(1, lambda s: s[0] > killed_at, timeout=150)  # the restarted worker trains
        code, out = job.wait(timeout=200)
        ended_at = time.time()
        files = {path.name: path.stat().st_size for path in job.log_dir.iterdir()}
        steps = {worker: job.steps(worker) for worker in range(3)}
    assert code == 0, out[-6000:]
    assert "worker 1 was killed by SIGKILL; starting it again" in out, out[-4000:]
    for survivor in (0, 2):  # 3 workers, 2 after the kill, 3 again once the restarted one joined
        sizes = [s[-1] for s in steps[survivor]]
        changes = [size for i, size in enumerate(sizes) if i == 0 or size != sizes[i - 1]]
        assert changes == [3, 2, 3], f"worker {survivor}'s steps (time from the kill, ..., size): " + \
            str([(round(s[0] - killed_at, 2), *s[1:]) for s in steps[survivor]]) + out[-4000:]
    print(f"{script}: killed {killed_at - started_at:.1f} s after the start; the restarted worker's first step "
          f"{back[0] - killed_at:.1f} s after the kill; the job ended {ended_at - back[0]:.1f} s later")
    return out, files, steps


def assert_every_worker_ended_alike(out):
    """Every worker printed its end, the three as ranks 0 to 2 of a job of 3, all with the same weights;
    returns {worker: the rest of its line}."""
    ends = re.findall(END, out)
    assert sorted(int(e[0]) for e in ends) == [0, 1, 2], out[-4000:]
    assert sorted(int(e[1]) for e in ends) == [0, 1, 2], ends
    assert len({e[2] for e in ends}) == 1, f"the weights differ: {ends}"
    assert all(" size 3" in e[3] for e in ends), ends
    return {int(e[0]): e[3] for e in ends}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("legacy_keras", [1, 0], ids=["tf_keras", "keras3"])
def test_the_keras_mnist_example_goes_on_across_a_kill_and_a_restart(legacy_keras):
    """fit() with KerasState, a DistributedOptimizer(backward_passes_per_step=1,
    average_aggregated_gradients=True), a reset callback that sets the learning rate and runs fit(), a commit
    every batch, ModelCheckpoint on rank 0: killed in the first epoch, every worker ends all epochs with the
    same weights and the learning rate of 3 workers, and rank 0 wrote the checkpoints."""
    out, files, _ = run_with_a_kill("elastic_keras_mnist_example.py", ["{log_dir}"], legacy_keras,
                                    lambda s: s[1] == 0 and s[2] >= 4)
    ends = assert_every_worker_ended_alike(out)
    assert all("epochs 4 " in end and end.endswith("learning rate 0.0030") for end in ends.values()), ends
    checkpoints = [name for name in files if re.fullmatch(r"checkpoint-\d+\.h5", name)]
    assert checkpoints and all(files[name] > 0 for name in checkpoints), files


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", [{}, {"BYTEPS_ENABLE_ASYNC": 1}], ids=["sync", "async"])
def test_the_custom_loop_mnist_example_goes_on_across_a_kill_and_a_restart(mode):
    """A DistributedGradientTape loop over dataset.skip(state.batch).take(N // size()) with
    TensorFlowKerasState and a commit every batch (tf-keras, only the import changed): every worker ends at
    the same batch with the same weights and the learning rate of 3 workers, and rank 0 saved the
    tf.train.Checkpoint. Asynchronously too (the tape pushes each step's change at the next)."""
    out, files, _ = run_with_a_kill("elastic_tf2_mnist_example.py", ["{log_dir}"], 1, lambda s: s[1] >= 5, **mode)
    ends = assert_every_worker_ended_alike(out)
    assert len({re.search(r"batch (\d+)", end).group(1) for end in ends.values()}) == 1, ends
    assert all(end.endswith("learning rate 0.0030") for end in ends.values()), ends
    losses = re.findall(r"\[worker 0\] Step #\d+\tLoss: ([0-9.]+)", out)
    assert losses and float(losses[0]) > 2.0 and float(losses[-1]) < 1.8, losses  # it trained, across the kill
    assert files.get("checkpoints-1.index", 0) > 0 and "checkpoint" in files, files


@pytest.mark.timeout(300)
def test_the_synthetic_benchmark_example_goes_on_across_a_kill_and_a_restart():
    """The benchmark with --fp16-allreduce and a commit every 2 batches (Keras 3): killed after its warm-up,
    every worker ends with the same weights, the learning rate of 3 workers and an img/sec measurement for
    every iteration at least; rank 0 logged the results for 3 workers."""
    num_iters = 10
    out, _, _ = run_with_a_kill(
        "elastic_synthetic_benchmark_example.py",
        ["--log-dir", "{log_dir}", "--fp16-allreduce", "--num-batches-per-commit", 2, "--num-iters", num_iters,
         "--no-cuda"], 0, lambda s: s[1] == 1 and s[2] >= 1)
    ends = assert_every_worker_ended_alike(out)
    for end in ends.values():
        assert int(re.search(r"img_secs (\d+)", end).group(1)) >= num_iters, ends
        assert f"iter {num_iters - 1} " in end and end.endswith("learning rate 0.0300"), ends
    assert re.search(r"\[worker 0\] Img/sec per CPU: [0-9.]+ \+-[0-9.]+", out), out[-4000:]
    assert re.search(r"\[worker 0\] Total img/sec on 3 CPU\(s\): [0-9.]+ \+-[0-9.]+", out), out[-4000:]


@pytest.mark.timeout(300)
def test_a_strategy_run_loop_follows_the_replica_count_across_a_kill_and_a_restart():
    """strategy.run over a distributed dataset inside elastic.run with TensorFlowKerasState (Keras 3): after
    each reset num_replicas_in_sync is the job's size, every step's loss is scaled by the replica count of
    its generation (3, then 2 after the kill, then 3 again), and every worker ends with the same weights."""
    out, _, steps = run_with_a_kill("elastic_strategy_loop.py", ["{log_dir}"], 0,
                                    lambda s: s[1] == 0 and s[2] >= 5)
    assert_every_worker_ended_alike(out)
    assert "WRONG SCALE" not in out, out[-4000:]
    resets = re.findall(r"\[worker (\d)\] rank \d: reset: size (\d) replicas in sync (\d)", out)
    assert all(size == replicas for _, size, replicas in resets), resets
    for survivor in ("0", "2"):
        assert [size for worker, size, _ in resets if worker == survivor] == ["2", "3"], resets
    for worker, rows in steps.items():
        assert all(replicas == size for *_, replicas, size in rows), (worker, rows)
    assert {row[-1] for row in steps[0]} == {2, 3}, steps[0]
