"""TensorFlow settings bps_tf's workers run with. TensorFlow reads them from the environment once, when it
creates its CPU allocator (at its first op), so they are set before that: by bpslaunch in every worker's
environment, and when bps_tf's TensorFlow layer is imported. A value the user set is kept.

This module imports nothing: the launcher uses it, and it must not load TensorFlow."""

import os

ALLOCATOR_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"
ALLOCATOR_LIMIT_VARIABLE = "TF_CPU_BFC_MEM_LIMIT_IN_MB"


def _physical_memory_mb():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20


def defaults():
    """{variable: value} of the settings.

    Under tf.distribute's input pipeline TensorFlow's default CPU allocator hands every step fresh memory,
    so each step faults its activations in anew: a BERT-like model under
    MirroredStrategy on one CPU took ~106000 page faults and 1.7x the time of the same step without the
    strategy. The BFC allocator keeps freed buffers for the next step (~11000 faults, the step as fast as
    without the strategy). Its own cap is 64 GB; the machine's memory is the cap here."""
    return {ALLOCATOR_VARIABLE: "true", ALLOCATOR_LIMIT_VARIABLE: str(_physical_memory_mb())}


def apply(environ):
    """Sets each default `environ` lacks; returns `environ`."""
    for name, value in defaults().items():
        environ.setdefault(name, value)
    return environ
