"""Access to the native core `bps_tf._core`, imported only by the processes that need it."""

import importlib


class CoreUnavailableError(RuntimeError):
    """The native core is not built or cannot be loaded."""


def load_core():
    """Returns the `bps_tf._core` module, or raises CoreUnavailableError saying how to fix it."""
    try:
        return importlib.import_module("bps_tf._core")
    except ImportError as error:
        raise CoreUnavailableError(
            f"cannot load the native core bps_tf._core ({error}); build it first (see README.md)"
        ) from error
