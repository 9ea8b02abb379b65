"""Deterministic tensor names: the same code on every worker yields the same names, and an eager loop
reuses one name instead of declaring a new tensor on every call."""

import os
import sys

import tensorflow as tf

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _caller_location():
    """file:line of the first frame outside bps_tf (the user's call site)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return "unknown"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _signature(tensor):
    dims = "x".join("?" if d is None else str(d) for d in tensor.shape.as_list()) if tensor.shape.rank is not None \
        else "?"
    return f"{tensor.dtype.name}[{dims}]"


def tensor_name(tensor, name, kind, with_shape=True):
    """The name `tensor` is declared under: `name` if given, else one derived deterministically (in eager
    mode from the call site and, unless `with_shape` is False, the dtype and shape)."""
    if name:
        return f"{kind}.{name}"
    if not tf.executing_eagerly():
        graph = tf.compat.v1.get_default_graph()
        graph_name = getattr(graph, "name", "") or "graph"
        return f"{kind}.{graph_name}/{tensor.name}"
    signature = _signature(tensor) if with_shape else tensor.dtype.name
    return f"{kind}.eager.{_caller_location()}.{signature}"
