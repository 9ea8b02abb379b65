"""What a process that has not joined a job is told (no job needed)."""

import pytest
import tensorflow as tf

import bps_tf as bps


@pytest.fixture(autouse=True)
def no_job_environment(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith(("DMLC_", "BYTEPS_")):
            monkeypatch.delenv(name)


def test_an_op_before_init_is_a_clear_error():
    with pytest.raises(tf.errors.FailedPreconditionError, match=r"call bps_tf.init\(\) first"):
        bps.push_pull(tf.ones(2), name="x")


def test_init_without_a_role_is_a_clear_error():
    with pytest.raises(ValueError, match="DMLC_ROLE is not set"):
        bps.init()
