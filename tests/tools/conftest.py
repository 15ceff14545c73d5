"""Fixtures for the tool instrumentations: the in-memory SDK plus one instrumentor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_latency.instrumentation.tools.subprocess import SubprocessInstrumentor


@pytest.fixture
def subprocess_spans(otel) -> Iterator[object]:  # type: ignore[no-untyped-def]
    instrumentor = SubprocessInstrumentor()
    instrumentor.instrument()
    try:
        yield otel
    finally:
        instrumentor.uninstrument()



@pytest.fixture
def instrumented(otel) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """``instrumented(*instrumentors)``: the in-memory SDK with these instrumentors applied
    for the test (removed, last first, at its end)."""
    applied: list[object] = []

    def apply(*instrumentors: object) -> object:
        for instrumentor in instrumentors:
            instrumentor.instrument()  # type: ignore[attr-defined]
            applied.append(instrumentor)
        return otel

    try:
        yield apply
    finally:
        for instrumentor in reversed(applied):
            instrumentor.uninstrument()  # type: ignore[attr-defined]
