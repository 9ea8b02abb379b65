"""The link rates and bandwidth bounds the benchmarks report against (benchmarks/lib/measure.py)."""

import pytest

from benchmarks.lib.measure import bounds, rate_bytes_per_s


def test_rates_and_bounds():
    assert rate_bytes_per_s("1gbit") == 125e6 and rate_bytes_per_s("100mbps") == 100e6
    with pytest.raises(ValueError):
        rate_bytes_per_s("fast")
    assert bounds("1gbit", 4, 4, colocate=False)["push_pull_factor"] == 1.0
    assert bounds("1gbit", 4, 4, colocate=True)["push_pull_factor"] == bounds("1gbit", 4, 4, False)["ring_factor"] == 1.5
