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

