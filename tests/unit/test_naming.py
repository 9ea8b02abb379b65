"""Tensor names (bps_tf.ops.naming): the same code yields the same name on every worker and every call."""

import pytest
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


def test_one_name_for_two_ops_of_one_graph_is_an_error_when_it_is_traced():
    from bps_tf.ops import Sum, push_pull

    @tf.function
    def two_with_one_name(a, b):
        return push_pull(a, name="shared", op=Sum), push_pull(b, name="shared", op=Sum)

    with pytest.raises(ValueError, match="'push_pull.shared' is used by two push_pull/broadcast ops in one graph"):
        two_with_one_name.get_concrete_function(tf.TensorSpec([3]), tf.TensorSpec([3]))


def test_the_local_replicas_of_one_reduction_may_share_its_name():
    from bps_tf.ops import Sum, push_pull

    @tf.function
    def replicas(a, b):
        return push_pull(a, name="r", op=Sum, local_devices=2), push_pull(b, name="r", op=Sum, local_devices=2)

    replicas.get_concrete_function(tf.TensorSpec([3]), tf.TensorSpec([3]))  # no error


def test_each_trace_and_each_branch_has_names_of_its_own():
    from bps_tf.ops import Sum, push_pull

    @tf.function
    def branches(flag, a):
        return tf.cond(flag, lambda: push_pull(a, name="b", op=Sum), lambda: push_pull(a * 2, name="b", op=Sum))

    branches.get_concrete_function(tf.TensorSpec([], tf.bool), tf.TensorSpec([3]))
    branches.get_concrete_function(tf.TensorSpec([], tf.bool), tf.TensorSpec([4]))  # a second trace
