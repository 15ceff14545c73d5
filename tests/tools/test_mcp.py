"""MCP tools/call against a real server over stdio and streamable HTTP."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import agent_latency
from agent_latency import semconv

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402

from agent_latency.instrumentation.tools.mcp import MCPInstrumentor  # noqa: E402
from agent_latency.instrumentation.tools.subprocess import SubprocessInstrumentor  # noqa: E402

SERVER = str(Path(__file__).parent / "mcp_server.py")


@pytest.fixture
def mcp_otel(otel):
    instrumentors = [SubprocessInstrumentor(), MCPInstrumentor()]
    for i in instrumentors:
        i.instrument()
    yield otel
    for i in instrumentors:
        i.uninstrument()


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _tool_spans(otel):
    return [s for s in otel.spans() if s.name.startswith("execute_tool")]


async def _calls(session: ClientSession) -> dict[str, str]:
    await session.initialize()
    out = {"add": _text(await session.call_tool("add", {"a": 2, "b": 3}))}
    out["slow"] = _text(await session.call_tool("slow", {"seconds": 0.2}))
    out["traceparent"] = _text(await session.call_tool("traceparent", {}))
    out["timed"] = _text(await session.call_tool("timed", {"seconds": 0.2}))
    failed = await session.call_tool("fail", {})
    out["fail"] = str(getattr(failed, "isError", getattr(failed, "is_error", None)))
    return out


def _check(otel, out: dict[str, str], transport: str) -> None:
    assert out["add"] == "5" and out["slow"] == "done" and out["timed"] == "timed"
    assert out["fail"] == "True"
    task = otel.span("invoke_agent mcp")
    spans = {s.attributes[semconv.GEN_AI_TOOL_NAME]: s for s in _tool_spans(otel)}
    # No process span for the stdio server itself: it is the transport, not a tool run.
    assert set(spans) == {"add", "slow", "traceparent", "timed", "fail"}, list(spans)
    for s in spans.values():
        a = s.attributes
        assert s.kind == SpanKind.CLIENT
        assert s.parent.span_id == task.context.span_id
        assert a[semconv.MCP_METHOD_NAME] == "tools/call"
        assert a[semconv.GEN_AI_OPERATION_NAME] == "execute_tool"
        assert a[semconv.NETWORK_TRANSPORT] == transport
    slow = spans["slow"]
    assert slow.attributes[semconv.COMPONENT] == semconv.TOOL_EXECUTION
    assert (slow.end_time - slow.start_time) / 1e9 >= 0.2
    # The server received a traceparent of this trace (ours in mcp 1.x, the SDK's child
    # span of ours in mcp 2.x).
    tp = out["traceparent"]
    trace_id = f"{spans['traceparent'].context.trace_id:032x}"
    assert tp.split("-")[1] == trace_id, tp
    ids = {f"{s.context.span_id:016x}": s for s in otel.spans()}
    parent = ids.get(tp.split("-")[2])
    if parent is not None:  # the SDK's own span may go to an earlier test's provider
        assert parent is spans["traceparent"] or parent.parent.span_id == \
            spans["traceparent"].context.span_id
    # Server-reported time splits the call into server (tool) and transport (network).
    timed = spans["timed"]
    server = timed.attributes[semconv.MCP_SERVER_TIME]
    transport_s = timed.attributes[semconv.MCP_TRANSPORT]
    assert server >= 0.2 and transport_s >= 0
    assert server + transport_s == pytest.approx((timed.end_time - timed.start_time) / 1e9,
                                                 abs=1e-6)
    assert semconv.COMPONENT not in timed.attributes
    children = [s for s in otel.spans() if s.parent is not None
                and s.parent.span_id == timed.context.span_id
                and semconv.COMPONENT in s.attributes]
    assert sorted(c.attributes[semconv.COMPONENT] for c in children) == [
        "network", semconv.TOOL_EXECUTION]
    fail = spans["fail"]
    assert fail.status.status_code == StatusCode.ERROR
    assert fail.attributes[semconv.ERROR_TYPE] == "tool_error"
    # Budget: 5 tool calls, the network share includes the transport of "timed".
    a = task.attributes
    assert a[semconv.budget_count("tool_calls")] == 5
    assert a[semconv.budget_busy(semconv.TOOL_EXECUTION)] >= 0.4
    assert a[semconv.budget_busy(semconv.NETWORK_OVERHEAD)] > 0
    parts = sum(a[semconv.budget_share(c)] for c in semconv.COMPONENTS)
    assert parts == pytest.approx(a[semconv.BUDGET_WALL], abs=1e-9)


async def test_stdio(mcp_otel):
    from mcp.client.stdio import stdio_client  # as a program imports it, once instrumented

    params = StdioServerParameters(command=sys.executable, args=[SERVER, "stdio"])
    with agent_latency.task("mcp"):
        async with stdio_client(params) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                out = await _calls(session)
    _check(mcp_otel, out, "pipe")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _http_server():
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    port = _free_port()
    with suppress_instrumentation():  # the test's own server is no tool of the task
        proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("MCP HTTP server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_streamable_http(mcp_otel):
    from mcp.client import streamable_http

    client = getattr(streamable_http, "streamable_http_client", None) or \
        streamable_http.streamablehttp_client  # mcp 1.x before the rename
    with _http_server() as url:
        mcp_otel.exporter.clear()
        with agent_latency.task("mcp"):
            async with client(url) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    out = await _calls(session)
    _check(mcp_otel, out, "tcp")
    if len(streams) > 2:  # mcp 1.x exposes the session id
        ids = {s.attributes.get(semconv.MCP_SESSION_ID) for s in _tool_spans(mcp_otel)}
        assert len(ids) == 1 and None not in ids


def test_uninstrument_leaves_mcp_as_it_was(otel):
    original = ClientSession.call_tool
    i = MCPInstrumentor()
    i.instrument()
    assert ClientSession.call_tool is not original
    i.uninstrument()
    assert ClientSession.call_tool is original
    import mcp.client.stdio as stdio
    import wrapt

    assert not isinstance(stdio.stdio_client, wrapt.ObjectProxy)
