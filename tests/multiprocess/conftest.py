"""Fixtures that start what several test modules share once per session."""

import pytest

from testing import slurm


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real two-node SLURM cluster on this machine (testing/slurm.py), or a skip saying why there is none."""
    reason = slurm.why_unavailable()
    if reason:
        pytest.skip(f"no SLURM cluster: {reason}")
    with slurm.SlurmCluster(nodes=2) as cluster:
        yield cluster
