"""Gradient compression across real processes: the numbers every worker receives against a NumPy model of
workers and servers, and training with compressed gradients (strategy and tape)."""

import pytest

from testing.jobs import assert_job_ok, run_local


@pytest.mark.timeout(300)
def test_compressed_sums_match_a_model_of_workers_and_servers():
    result = run_local("compressed_sums.py", 2, 2, BYTEPS_PARTITION_BYTES=65536)
    assert_job_ok(result, 2, "compressed sums match the model")


@pytest.mark.timeout(400)
@pytest.mark.parametrize("compression", ["onebit", "randomk:0.25"])
def test_training_with_compressed_gradients_learns_and_stays_identical(compression):
    result = run_local("compressed_training.py", 2, 1, compression, BYTEPS_COMPRESSION=compression,
                       BYTEPS_MIN_COMPRESS_BYTES=0)
    assert_job_ok(result, 2, "compressed training")
    assert result.stdout.count("weights identical") == 2, result.stdout[-3000:]
