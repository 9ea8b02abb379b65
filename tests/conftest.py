"""Test layout: tests/unit holds single-process tests (no job, no network); tests/multiprocess runs real jobs
(bpslaunch, UCX on loopback, real TensorFlow training); tests/workers holds the scripts those jobs run.
The shared helpers (tests/jobs.py) are importable from both."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
