"""Runs several worker scripts of tests/workers one after another in this process, each as a generation of
the same job (each script's main() calls init() and shutdown()), so that a test pays TensorFlow's start-up
once for all of them. Scripts that configure logical devices must ask for the same number. The scripts are
imported as modules of tests.workers (the checkout's root is on PYTHONPATH).

Usage: run_checks.py SCRIPT [ARGS...] [-- SCRIPT [ARGS...]]..."""

import importlib
import sys
from pathlib import Path


def scripts(argv):
    current = []
    for word in argv + ["--"]:
        if word == "--":
            if current:
                yield current
            current = []
        else:
            current.append(word)


def main():
    for script, *args in scripts(sys.argv[1:]):
        sys.argv = [script, *args]
        importlib.import_module(f"tests.workers.{Path(script).stem}").main()


if __name__ == "__main__":
    main()
