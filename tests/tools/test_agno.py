"""Agno (in-process): tool calls are execute_tool spans; a failed call is an ERROR span."""

from __future__ import annotations

import pytest

import agent_latency
from agent_latency import semconv

pytest.importorskip("agno")
from agno.tools.function import Function, FunctionCall

from agent_latency.instrumentation.tools.agno import AgnoInstrumentor


def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key} = 42"


def broken(key: str) -> str:
    """Fails."""
    raise KeyError(key)


def _call(func, call_id: str = "call_1") -> FunctionCall:
    function = Function.from_callable(func)
    function.process_entrypoint()
    return FunctionCall(function=function, arguments={"key": "x"}, call_id=call_id)


class TestToolCalls:
    """execute and aexecute: one span each with the call id; failures are ERROR."""

    def test_execute(self, instrumented):
        otel = instrumented(AgnoInstrumentor())
        with agent_latency.task("t"):
            assert _call(lookup).execute().result == "x = 42"
        span = otel.span("execute_tool lookup")
        assert span.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "call_1"
        assert span.attributes[semconv.TOOL_SOURCE] == "agno"
        assert span.status.status_code.name == "UNSET"
        task = otel.span("invoke_agent t").attributes
        assert task[semconv.budget_count("tool_calls")] == 1

    async def test_aexecute(self, instrumented):
        otel = instrumented(AgnoInstrumentor())
        assert (await _call(lookup).aexecute()).status == "success"
        assert otel.span("execute_tool lookup")

    def test_a_failed_call_is_an_error_span(self, instrumented):
        """Agno catches the tool's exception and reports the call as failed."""
        otel = instrumented(AgnoInstrumentor())
        assert _call(broken).execute().status == "failure"
        span = otel.span("execute_tool broken")
        assert span.status.status_code.name == "ERROR"
        assert span.attributes[semconv.ERROR_TYPE] == "tool_error"
