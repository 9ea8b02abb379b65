"""CommunicationMetrics in a 2-worker Keras fit, with Keras's TensorBoard callback: the event files hold every
figure, the bytes per step are exactly the model's gradients (encoded by one-bit compression: computed here
from the codec's layout), and the worker that waits for a straggler says so. The same figures from a custom
loop through write_communication_summaries."""

import json
import math

import pytest
import tensorflow as tf

from testing.jobs import assert_job_ok, run_local

FIGURES = ["bps/push_pull_ms", "bps/wait_ms", "bps/bytes_pushed", "bps/bytes_pulled", "bps/messages_sent",
           "bps/messages_received", "bps/compression_ratio", "bps/workers"]
EVERY_N_STEPS = 3  # as the worker sets it
MIN_COMPRESS_BYTES = 65536  # BYTEPS_MIN_COMPRESS_BYTES's default: smaller gradients travel as they are
STRAGGLER_MS = 50  # worker 1 starts every step this late (tests/workers/communication_metrics.py)


def scalars(folder):
    """{tag: {step: value}} of the scalars in every event file under `folder` (not the model's graph)."""
    found = {}
    for path in folder.rglob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                number = tf.make_ndarray(value.tensor) if value.HasField("tensor") else value.simple_value
                if getattr(number, "dtype", None) is not None and number.dtype.kind not in "fiu":
                    continue
                found.setdefault(value.tag, {})[event.step] = float(number)
    return found


def wire_bytes(elements, compression):
    """Bytes one push of a float32 gradient of `elements` takes: one-bit sends a float scale and a bit per element
    (cc/compress/codec.cc), for gradients of at least MIN_COMPRESS_BYTES."""
    if compression == "onebit" and elements * 4 >= MIN_COMPRESS_BYTES:
        return 4 + math.ceil(elements / 8)
    return elements * 4


@pytest.mark.timeout(400)
@pytest.mark.parametrize("compression, keras", [("none", "3"), ("onebit", "tf-keras")])
def test_tensorboard_gets_every_figure_with_the_models_gradient_bytes_per_step(tmp_path, compression, keras):
    env = {"TF_USE_LEGACY_KERAS": "1"} if keras == "tf-keras" else {}
    result = run_local("communication_metrics.py", 2, 1, tmp_path, compression, TF_CPP_MIN_LOG_LEVEL=2, **env)
    assert_job_ok(result, 2, "done")
    waits = {}
    for rank in (0, 1):
        report = json.loads((tmp_path / f"{rank}.json").read_text())
        gradient_bytes = 4 * sum(report["gradient_elements"])
        pushed = sum(wire_bytes(n, compression) for n in report["gradient_elements"])
        assert {f for f in FIGURES} <= set(report["history"]), report["history"]
        fit = scalars(tmp_path / str(rank) / "fit")
        for figure in FIGURES:
            assert f"batch_{figure}" in fit and f"epoch_{figure}" in fit, sorted(fit)
        batches = sorted(fit["batch_bps/bytes_pushed"])
        # TensorBoard's step is the batch's number counted from 1. The first window (its figures stay in the
        # logs until the second is read) also holds the broadcast of the initial weights after the first batch.
        steady = [step for step in batches if step >= 2 * EVERY_N_STEPS]
        assert len(steady) > 20, batches
        for step in steady:
            assert fit["batch_bps/bytes_pushed"][step] == pushed, (step, pushed, gradient_bytes)
            assert fit["batch_bps/bytes_pulled"][step] == pushed, (step, pushed)
            assert fit["batch_bps/compression_ratio"][step] == pytest.approx(pushed / gradient_bytes, rel=1e-6)
            assert fit["batch_bps/workers"][step] == 2
            # One server, gradients far below a partition: each travels whole, alone or with others for the
            # same server, and every push gets one reply.
            sent = fit["batch_bps/messages_sent"][step]
            assert 1 <= sent <= len(report["gradient_elements"]) and sent == round(sent), (step, sent)
            assert fit["batch_bps/messages_received"][step] == sent, step
            assert fit["batch_bps/push_pull_ms"][step] >= fit["batch_bps/wait_ms"][step] >= 0
        for epoch in (1, 2):
            assert fit["epoch_bps/bytes_pushed"][epoch] == pushed, fit["epoch_bps/bytes_pushed"]
        if compression == "onebit":
            assert pushed < gradient_bytes / 5  # the 64x300 kernel: 32x smaller
        waits[rank] = sorted(fit["batch_bps/wait_ms"][step] for step in steady)[len(steady) // 2]
        loop = scalars(tmp_path / str(rank) / "loop")
        assert set(FIGURES) <= set(loop), sorted(loop)
        assert loop["bps/bytes_pushed"] == {1: pushed, 3: pushed}, loop["bps/bytes_pushed"]
        assert loop["bps/messages_sent"] == loop["bps/messages_received"], loop["bps/messages_sent"]
    # Worker 0 waits at the servers for worker 1 in every step; worker 1 pushes last and hardly waits.
    assert waits[0] > 0.5 * STRAGGLER_MS and waits[1] < waits[0] / 3, waits
