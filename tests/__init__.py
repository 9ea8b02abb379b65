"""bps_tf's tests (see conftest.py); a package so that `python -m tests.reliability` and tests/workers/run_checks.py
import their modules by name from the checkout's root."""
