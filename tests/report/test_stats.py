"""Percentiles and summaries for the report."""

from __future__ import annotations

import itertools
import math
import statistics
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_latency.report._stats import percentile, summarize

finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)


class TestPercentile:
    """Linear interpolation between closest ranks, as numpy's default."""

    def test_known_values(self) -> None:
        assert percentile([1, 2, 3, 4], 50) == 2.5
        assert percentile([1, 2, 3, 4, 5], 50) == 3
        assert percentile(range(1, 101), 95) == pytest.approx(95.05)
        assert percentile([10], 99) == 10
        assert percentile([], 50) is None
        assert percentile([3, 1, 2], 0) == 1 and percentile([3, 1, 2], 100) == 3

    def test_nan_ignored(self) -> None:
        assert percentile([float("nan"), 1.0, 3.0], 50) == 2.0

    def test_out_of_range_rejected(self) -> None:
        with pytest.raises(ValueError):
            percentile([1], 101)

    @given(st.lists(finite, min_size=2, max_size=50))
    def test_agrees_with_statistics_inclusive(self, values: list[float]) -> None:
        cuts = statistics.quantiles(values, n=100, method="inclusive")
        for q in (50, 95, 99):
            assert percentile(values, q) == pytest.approx(cuts[q - 1], rel=1e-9, abs=1e-6)

    @given(st.lists(finite, min_size=1, max_size=50))
    def test_monotonic_and_bounded(self, values: list[float]) -> None:
        p = [percentile(values, q) for q in (0, 50, 95, 99, 100)]
        assert p[0] == min(values) and p[-1] == max(values)
        assert all(a <= b + 1e-6 for a, b in itertools.pairwise(p))


class TestSummarize:
    """count, p50, p95, p99, max and mean in one dict."""

    def test_keys_and_values(self) -> None:
        s = summarize([1.0, 2.0, 3.0, 4.0])
        assert s == {"count": 4, "p50": 2.5, "p95": pytest.approx(3.85),
                     "p99": pytest.approx(3.97), "max": 4.0, "mean": 2.5}

    def test_empty(self) -> None:
        assert summarize([]) == {"count": 0, "p50": None, "p95": None, "p99": None,
                                 "max": None, "mean": None}


class TestMeanOfHugeValues:
    """A mean whose sum overflows a float is still the mean (a fuzzed trace found it)."""

    def test_two_values_near_the_largest_float(self) -> None:
        big = 8.988465674311579e307
        assert summarize([big, big])["mean"] == big

    def test_both_infinities_have_no_mean(self) -> None:
        out = summarize([math.inf, -math.inf])
        assert out["count"] == 2 and math.isnan(out["mean"])  # type: ignore[arg-type]

    def test_three_of_the_largest_float(self) -> None:
        # (found by the property below on one run of make test: each third rounded up, and
        # the thirds' sum overflowed in turn)
        assert summarize([sys.float_info.max] * 3)["mean"] == sys.float_info.max

    @given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1))
    def test_mean_within_the_values(self, values: list[float]) -> None:
        mean = summarize(values)["mean"]
        assert isinstance(mean, float) and math.isfinite(mean)
        low, high = min(values), max(values)
        # (within the values, up to the rounding of a division: a few units in the last place)
        assert low - 4 * math.ulp(low) <= mean <= high + 4 * math.ulp(high)
