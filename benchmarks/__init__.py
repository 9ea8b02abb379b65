"""bps_tf benchmarks against TensorFlow's own collectives (docs/performance.md).

Run from the repository root as modules, e.g. `python -m benchmarks.push_pull_loopback`.
"""
