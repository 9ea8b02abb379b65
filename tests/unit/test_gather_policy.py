"""When sparse gradients are gathered as rows instead of summed as dense tensors (bps_tf.ops.gather)."""

import pytest
import tensorflow as tf

import bps_tf.ops.gather as gather


@pytest.fixture(autouse=True)
def four_workers(monkeypatch):
    monkeypatch.setattr(gather, "size", lambda: 4)


def slices(rows, table_rows, static=True):
    values = tf.zeros([rows, 8])
    indices = tf.zeros([rows], tf.int64)
    dense_shape = tf.constant([table_rows, 8], tf.int64)
    if not static:
        values = tf.compat.v1.placeholder_with_default(values, [None, 8])
    return tf.IndexedSlices(values, indices, dense_shape)


def test_fewer_gathered_rows_than_the_table_gather():
    assert gather.gather_is_smaller([slices(10, 100)])  # 4 workers x 10 rows < 100


def test_more_gathered_rows_than_the_table_go_dense():
    assert not gather.gather_is_smaller([slices(30, 100)])  # 4 x 30 >= 100


def test_a_process_rows_count_together():
    assert not gather.gather_is_smaller([slices(15, 100), slices(15, 100)])  # 4 x 30 >= 100


def test_unknown_row_counts_gather():
    with tf.Graph().as_default():
        assert gather.gather_is_smaller([slices(30, 100, static=False)])
