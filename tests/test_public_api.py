"""The public API is curated and pinned."""

from __future__ import annotations

import agent_latency
import agent_latency.budget


class TestPublicApi:
    """What users may import, and that every public name is documented."""

    def test_top_level_all_is_pinned_and_sorted(self):
        assert agent_latency.__all__ == [
            "Budget", "BudgetSpanProcessor", "Interval", "Projection", "Scenario",
            "__version__", "instrument", "is_instrumented", "task", "tool", "uninstrument",
        ]
        assert agent_latency.__all__ == sorted(agent_latency.__all__)

    def test_every_public_name_resolves_and_has_a_docstring(self):
        for name in agent_latency.__all__:
            value = getattr(agent_latency, name)
            if name != "__version__":
                assert value.__doc__, name

    def test_budget_all_is_sorted_and_documented(self):
        names = agent_latency.budget.__all__
        assert names == sorted(names)
        for name in names:
            value = getattr(agent_latency.budget, name)
            if callable(value):
                assert value.__doc__, name

    def test_unknown_attribute_is_an_attribute_error(self):
        import pytest

        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            agent_latency.nope  # noqa: B018
