"""Helpers shared by the LLM instrumentation tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from machine_load import busy_slack

from agent_latency import semconv
from agent_latency.simulator import SimulatorConfig

FAST = SimulatorConfig(prefill_tps=20000.0, output_tps=1000.0, default_output_tokens=8)


def llm_spans(otel: Any) -> list[Any]:
    return [s for s in otel.spans() if semconv.LLM_CLIENT in (s.attributes or {})]


def calls_in_order(otel: Any) -> list[Any]:
    """The LLM call spans, by start time."""
    return sorted(llm_spans(otel), key=lambda s: s.start_time)


def sockets_instrumented() -> Iterator[None]:
    """The wire recogniser on, for a module's tests (a module fixture's body)."""
    from agent_latency.instrumentation.llm.sockets import SocketsInstrumentor

    instrumentor = SocketsInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


def one_llm_span(otel: Any) -> Any:
    spans = llm_spans(otel)
    assert len(spans) == 1, [s.name for s in otel.spans()]
    return spans[0]


def phase_sum(span: Any) -> float:
    return sum(span.attributes[attr] for attr, _, _ in semconv.LLM_PHASES)


def assert_phases_add_up(span: Any) -> None:
    """Every phase attribute is written and they sum to the span's duration."""
    for attr, _, _ in semconv.LLM_PHASES:
        assert attr in span.attributes, attr
        assert span.attributes[attr] >= 0.0, attr
    duration = (span.end_time - span.start_time) / 1e9
    assert phase_sum(span) == pytest.approx(duration, abs=2e-6)


def truth_of(sim: Any, request_id: str, timeout: float = 3.0) -> dict[str, Any]:
    """The simulator's ground-truth record of one request (it lands after the last byte)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        found = [t for t in sim.truth if t["request_id"] == request_id]
        if found or time.monotonic() > deadline:
            assert len(found) == 1, request_id
            return found[0]
        time.sleep(0.005)


def loopback_tolerance() -> float:
    """How far a phase measured over loopback may sit from the simulator's truth: 30 ms, plus
    :func:`busy_slack` on a busy machine (benchmarks/bench_llm_accuracy.py has the figures)."""
    return 0.03 + busy_slack()
