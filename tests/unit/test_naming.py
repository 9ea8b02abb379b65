"""Tensor names (bps_tf.ops.naming): the same code yields the same name on every worker and every call."""

import tensorflow as tf

from bps_tf.ops.naming import tensor_name


def test_an_eager_loop_reuses_one_name():
    names = {tensor_name(tf.ones([3]), None, "push_pull") for _ in range(5)}
    assert len(names) == 1


def test_a_given_name_is_kept():
    assert tensor_name(tf.ones([3]), "given", "push_pull") == "push_pull.given"


def test_the_shape_is_part_of_an_eager_name_unless_told_otherwise():
    def named(tensor, with_shape=True):
        return tensor_name(tensor, None, "push_pull", with_shape=with_shape)  # one call site for both
    assert named(tf.ones([3])) != named(tf.ones([4]))
    assert named(tf.ones([3]), with_shape=False) == named(tf.ones([4]), with_shape=False)


def test_graph_names_follow_the_graph_tensor_and_are_stable_across_traces():
    @tf.function
    def f(x):
        return tf.constant(tensor_name(tf.identity(x, name="grad"), None, "push_pull"))

    a, b = f(tf.ones(2)).numpy(), f(tf.ones(2)).numpy()
    assert a == b and b"grad:0" in a
