"""Loading the native core `bps_tf._core`: the lowest layer, imported by the launcher's server and
scheduler processes as well as by workers (it never imports TensorFlow)."""

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
