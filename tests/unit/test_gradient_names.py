"""Gradients of two optimizers of one name get push_pull names of their own (bps_tf/strategy/gradient_names.py)."""

from bps_tf.strategy.gradient_names import gradient_scope


class _Optimizer:
    def __init__(self, name):
        self.name = name


def test_the_first_optimizer_of_a_name_keeps_its_names_and_later_ones_get_a_scope_each():
    first, second, third = _Optimizer("sgd_scope_test"), _Optimizer("sgd_scope_test"), _Optimizer("sgd_scope_test")
    other = _Optimizer("other_scope_test")
    assert gradient_scope(first) is None
    assert gradient_scope(other) is None
    assert gradient_scope(second) == "sgd_scope_test_bps1"
    assert gradient_scope(third) == "sgd_scope_test_bps2"
    # A step traced again (a second fit, a retrace) pushes under the same names as before.
    assert gradient_scope(first) is None and gradient_scope(second) == "sgd_scope_test_bps1"
