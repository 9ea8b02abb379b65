"""bps_tf: BytePS-style distributed training for TensorFlow.

Importing the package is cheap (the launcher, servers and the scheduler import it and must not load
TensorFlow); the public names are resolved on first use.
"""

__version__ = "0.1.0"

_CORE_NAMES = ("init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size")


def __getattr__(name):
    if name in _CORE_NAMES:
        from bps_tf import core

        return getattr(core, name)
    raise AttributeError(f"module 'bps_tf' has no attribute '{name}'")


def __dir__():
    return sorted(list(globals()) + list(_CORE_NAMES))
