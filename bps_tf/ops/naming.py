"""Deterministic tensor names: the same code on every worker yields the same names, and an eager loop
reuses one name instead of declaring a new tensor on every call.

Within one graph (a tf.function trace, a TF1 graph) a name may be used once: ops of one graph run in any
order, so two push_pulls under one name would be paired across workers in whatever order each worker ran
them, and sums would silently mix. That is an error when the graph is built.
"""

import os
import sys
import weakref

import tensorflow as tf

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_used_in_graph = weakref.WeakKeyDictionary()  # graph -> {name: uses}
_labels_in_graph = weakref.WeakKeyDictionary()  # graph -> {label: times asked for}


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


def claim(full_name, uses=1):
    """Records one use of `full_name` in the graph being built; an error beyond `uses` uses (the local
    replicas of one reduction share a name, one use each)."""
    if tf.executing_eagerly():
        return
    graph = tf.compat.v1.get_default_graph()
    used = _used_in_graph.setdefault(graph, {})
    used[full_name] = used.get(full_name, 0) + 1
    if used[full_name] > uses:
        raise ValueError(
            f"the name '{full_name}' is used by two push_pull/broadcast ops in one graph (a tf.function or TF1 "
            "graph). Its ops run in any order, so workers could pair the two differently and sum the wrong "
            "tensors together; give each op its own name (the name= argument).")


def occurrence_in_graph(label):
    """How many times `label` was asked for before in the graph being built (0 eagerly, where one name
    serves every call). Graphs are built in the same order on every worker, so the count is too."""
    if tf.executing_eagerly():
        return 0
    graph = tf.compat.v1.get_default_graph()
    seen = _labels_in_graph.setdefault(graph, {})
    seen[label] = seen.get(label, 0) + 1
    return seen[label] - 1


def tensor_name(tensor, name, kind, with_shape=True, uses=1, ignore_name_scope=True):
    """The name `tensor` is declared under: `name` if given (inside the current name scope unless
    `ignore_name_scope`), else one derived deterministically (in eager mode from the call site and, unless
    `with_shape` is False, the dtype and shape). Claimed in the graph being built (see claim)."""
    if name:
        scope = "" if ignore_name_scope else tf.get_current_name_scope()
        full_name = f"{kind}.{scope}/{name}" if scope else f"{kind}.{name}"
    elif not tf.executing_eagerly():
        graph = tf.compat.v1.get_default_graph()
        graph_name = getattr(graph, "name", "") or "graph"
        full_name = f"{kind}.{graph_name}/{tensor.name}"
    else:
        signature = _signature(tensor) if with_shape else tensor.dtype.name
        full_name = f"{kind}.eager.{_caller_location()}.{signature}"
    claim(full_name, uses)
    return full_name
