"""The project's scripts (scripts/*.py, not a package) as modules, for tests of their functions."""

import importlib.util

from testing.jobs import REPO_ROOT


def load_script(name):
    """scripts/NAME.py, imported as module NAME."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
