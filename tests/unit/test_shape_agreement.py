"""The message of bps_tf.ops.shape_agreement: this worker's shape and every dimension's range across workers."""

import tensorflow as tf

from bps_tf.ops import shape_agreement


def test_the_message_names_this_workers_shape_the_ranges_and_the_likely_cause():
    text = shape_agreement.message("BytePSStrategy.reduce", [10, 64], [10, 64], [11, 64], 1, "Do this.")
    assert "this worker's: [10, 64]; across workers: [10 to 11, 64]" in text, text
    assert "Batches of different sizes" in text and text.endswith("Do this."), text


def test_several_local_tensors_are_named_one_by_one():
    text = shape_agreement.message("reduce", [6, 2, 5, 2], [5, 2, 5, 2], [6, 2, 6, 2], 2, "")
    assert "this worker's: [6, 2], [5, 2]; across workers: [5 to 6, 2], [5 to 6, 2]" in text, text


def test_only_tensors_with_dimensions_are_checked():
    assert shape_agreement.needs_check(tf.ones([3, 2]))
    assert not shape_agreement.needs_check(tf.constant(1.0))
