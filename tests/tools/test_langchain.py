"""LangChain tools: BaseTool.run / arun are execute_tool spans in their task."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from opentelemetry.trace import StatusCode

import agent_latency
from agent_latency import semconv

pytest.importorskip("langchain_core")
from langchain_core.tools import tool

from agent_latency.instrumentation.tools.langchain import LangChainInstrumentor


@pytest.fixture
def lc_otel(otel):
    i = LangChainInstrumentor()
    i.instrument()
    yield otel
    i.uninstrument()


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool
def broken(x: str) -> str:
    """Always fails."""
    raise KeyError(x)


@tool
async def aecho(x: str) -> str:
    """Echo, async."""
    return x


def _tools(otel):
    return [s for s in otel.spans() if s.name.startswith("execute_tool")]


def test_invoke_with_tool_call_id(lc_otel):
    with agent_latency.task("t"):
        msg = add.invoke({"type": "tool_call", "name": "add", "id": "call_1",
                          "args": {"a": 1, "b": 2}})
        assert add.invoke({"a": 2, "b": 2}) == 4
    assert msg.content == "3"
    spans = _tools(lc_otel)
    assert [s.name for s in spans] == ["execute_tool add", "execute_tool add"]
    assert spans[0].attributes[semconv.GEN_AI_TOOL_CALL_ID] == "call_1"
    assert spans[0].attributes[semconv.GEN_AI_TOOL_TYPE] == "function"
    task = lc_otel.span("invoke_agent t")
    assert all(s.parent.span_id == task.context.span_id for s in spans)
    assert task.attributes[semconv.budget_count("tool_calls")] == 2


async def test_ainvoke_and_sync_tool_in_executor(lc_otel):
    with agent_latency.task("t"):
        assert await aecho.ainvoke({"x": "hi"}) == "hi"
        assert await add.ainvoke({"a": 1, "b": 1}) == 2  # sync tool, run in an executor
    task = lc_otel.span("invoke_agent t")
    spans = _tools(lc_otel)
    assert len(spans) == 2
    assert all(s.parent.span_id == task.context.span_id for s in spans)


def test_error_propagates_unchanged(lc_otel):
    with pytest.raises(KeyError) as info:
        broken.invoke({"x": "k"})
    assert info.value.args == ("k",)
    span = _tools(lc_otel)[0]
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "KeyError"


def test_threads_keep_the_task(lc_otel):
    with ThreadPoolExecutor(2) as pool, agent_latency.task("t"):
        assert list(pool.map(lambda i: add.invoke({"a": i, "b": 1}), range(3))) == [1, 2, 3]
    task = lc_otel.span("invoke_agent t")
    assert all(s.parent.span_id == task.context.span_id for s in _tools(lc_otel))
    assert task.attributes[semconv.budget_count("tool_calls")] == 3
