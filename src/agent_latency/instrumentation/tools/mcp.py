"""MCP tool calls: ``ClientSession.call_tool`` as ``execute_tool {tool}`` (mcp 1.x and 2.x).

The span (kind CLIENT) carries the MCP semantic-convention attributes (``mcp.method.name =
tools/call``, ``gen_ai.tool.name``, ``gen_ai.operation.name = execute_tool``,
``mcp.session.id`` when the transport has one, ``mcp.protocol.version``,
``network.transport`` = ``pipe`` for stdio or ``tcp`` for HTTP, ``network.protocol.name``)
and counts as tool execution.  The trace context goes into the request's ``_meta``
(``traceparent``/``tracestate``, SEP-414), so an instrumented server joins the trace; mcp
2.x injects it itself from its own child span, and we leave that alone.

Transport vs. server.  From the client alone the call is one wait: the request is written,
the response arrives.  When the server reports its own handling time in the result's
``_meta`` under ``io.agent-latency/server_duration`` (seconds), the call is split: the
server's time counts as tool execution and the rest of the call (both transit legs,
framing, the SDK's own work) as network overhead, recorded as two child spans that tile the
call (``mcp server {tool}`` and ``mcp transport``) plus ``agent_latency.mcp.server_time`` /
``agent_latency.mcp.transport`` on the call span.  Without it, the whole call is tool time.

The stdio server process that ``stdio_client`` starts is infrastructure, not a tool run: it
gets no process span (its calls have theirs).
"""

from __future__ import annotations

import importlib
import sys
import time
import weakref
from contextlib import nullcontext
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.trace import SpanKind, Status, StatusCode

from ... import semconv
from ..._log import FAULTS, fault, internal_error
from ..._scope import start_tool, tool_attributes, tracer
from .._base import Instrumentor, Patch
from ._frameworks import acall_as_tool

# stream object -> (transport, get_session_id or None), filled by the transport wrappers.
_streams: weakref.WeakKeyDictionary[Any, tuple[str, Any]] = weakref.WeakKeyDictionary()
# The same for stream types that take no weak reference (slots), by id; popped when a
# session picks its stream up, and bounded.
_streams_by_id: dict[int, tuple[str, Any]] = {}

_TRANSPORTS = (
    ("mcp.client.stdio", "stdio_client", "pipe", True),
    ("mcp.client.streamable_http", "streamable_http_client", "tcp", False),
    ("mcp.client.streamable_http", "streamablehttp_client", "tcp", False),
    ("mcp.client.sse", "sse_client", "tcp", False),
    ("mcp.client.websocket", "websocket_client", "tcp", False),
)


def _mcp_major() -> int:
    try:
        # importlib.metadata is start-up time: only once mcp is imported.
        from importlib.metadata import version

        return int(version("mcp").split(".")[0])
    except Exception:  # noqa: BLE001
        return 0


class _TransportCM:
    """Wraps a transport's async context manager: tags its streams, hides its spawn."""

    def __init__(self, inner: Any, transport: str, suppress: bool) -> None:
        self._inner = inner
        self._transport = transport
        self._suppress = suppress

    async def __aenter__(self) -> Any:
        with suppress_instrumentation() if self._suppress else nullcontext():
            streams = await self._inner.__aenter__()
        try:
            if FAULTS:
                fault("mcp.transport")
            items = tuple(streams) if isinstance(streams, tuple) else (streams,)
            session_id = items[2] if len(items) > 2 and callable(items[2]) else None
            for stream in items[:2]:
                try:
                    _streams[stream] = (self._transport, session_id)
                except TypeError:
                    if len(_streams_by_id) > 256:
                        _streams_by_id.clear()
                    _streams_by_id[id(stream)] = (self._transport, session_id)
        except Exception:  # noqa: BLE001
            internal_error("mcp.transport")
        return streams

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


def _wrap_transport(transport: str, suppress: bool) -> Any:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        return _TransportCM(wrapped(*args, **kwargs), transport, suppress)

    return wrapper


async def _no_span(wrapped: Any, instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
    with suppress_instrumentation():
        return await wrapped(*args, **kwargs)


def _session_init(wrapped: Any, instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    result = wrapped(*args, **kwargs)
    try:
        read = args[0] if args else kwargs.get("read_stream")
        info = None
        if read is not None:
            info = _streams_by_id.pop(id(read), None)
            if info is None:
                try:
                    info = _streams.get(read)
                except TypeError:
                    info = None
        if info is not None:
            instance.__dict__["_agent_latency_transport"] = info
    except Exception:  # noqa: BLE001, S110 - the span lacks transport
        pass
    return result


def _meta_server_time(result: Any) -> float | None:
    meta = getattr(result, "meta", None)
    if meta is None and isinstance(result, dict):
        meta = result.get("_meta")
    if not isinstance(meta, dict):
        return None
    value = meta.get(semconv.MCP_META_SERVER_DURATION)
    if isinstance(value, (int, float)) and value >= 0:
        return float(value)
    return None


class MCPInstrumentor(Instrumentor):
    """``execute_tool`` spans for MCP ``tools/call`` on the client side."""

    _instruments = ("mcp >= 1.0",)

    def setup(self, **kwargs: Any) -> None:
        self._inject = _mcp_major() < 2  # mcp 2 injects the context itself

    def patches(self) -> list[Patch]:
        rows: list[Patch] = [("mcp.client.session", "ClientSession.call_tool", self._call_tool),
                             ("mcp.client.session", "ClientSession.__init__", _session_init),
                             # The server process is the transport, not a tool run.
                             ("mcp.client.stdio", "_create_platform_compatible_process",
                              _no_span)]
        for module_name, func, transport, suppress in _TRANSPORTS:
            try:
                importlib.import_module(module_name)
            except Exception:  # noqa: BLE001, S112 - optional transports (websockets …)
                continue
            rows.append((module_name, func, _wrap_transport(transport, suppress)))
        return rows

    def applied(self) -> None:
        # The same functions re-exported by the packages (``from mcp import stdio_client``).
        for module, func in list(self._wrapped):
            if not module.__name__.startswith("mcp.client."):
                continue
            for alias in ("mcp", "mcp.client"):
                mod = sys.modules.get(alias)
                if mod is not None and getattr(mod, func, None) is getattr(
                        module, func).__wrapped__:
                    setattr(mod, func, getattr(module, func))
                    self._wrapped.append((mod, func))

    async def _call_tool(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
        clock: list[int] = []  # (wall start, monotonic start) of the call

        def start() -> trace.Span:
            name = args[0] if args else kwargs.get("name")
            name = str(name) if name else "mcp"
            attributes = tool_attributes(
                name, tool_type=semconv.TOOL_TYPE_EXTENSION, source="mcp", counted=False,
                extra={semconv.MCP_METHOD_NAME: "tools/call"})
            _session_attributes(instance, attributes)
            clock[:] = [time.time_ns(), time.perf_counter_ns()]
            return start_tool(name, attributes, kind=SpanKind.CLIENT, start_time=clock[0])

        def finish(span: trace.Span, result: Any) -> None:
            self._end(span, result, clock[0], time.perf_counter_ns() - clock[1])

        return await acall_as_tool(start, wrapped, args, kwargs, "mcp.call_tool",
                                   prepare=self._with_meta if self._inject else None,
                                   on_error=_counted_as_tool, finish=finish)

    @staticmethod
    def _with_meta(span: trace.Span, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's keyword arguments with the span's trace context in MCP ``_meta``."""
        meta = kwargs.get("meta")
        carrier: dict[str, Any] = dict(meta) if isinstance(meta, dict) else {}
        if "traceparent" in carrier:
            return kwargs
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        if meta is None or isinstance(meta, dict):
            return {**kwargs, "meta": carrier}
        return kwargs

    @staticmethod
    def _end(span: trace.Span, result: Any, start_ns: int, elapsed_ns: int) -> None:
        if getattr(result, "isError", None) is True or getattr(result, "is_error", None) is True:
            span.set_attribute(semconv.ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool reported an error"))
        server = _meta_server_time(result)
        end_ns = start_ns + elapsed_ns
        total = elapsed_ns / 1e9
        if server is None or server > total:
            span.set_attribute(semconv.COMPONENT, semconv.TOOL_EXECUTION)
            span.end(end_time=end_ns)
            return
        transport = total - server
        span.set_attribute(semconv.MCP_SERVER_TIME, server)
        span.set_attribute(semconv.MCP_TRANSPORT, transport)
        # Two children tile the call: transport (both legs, laid first) then the server.
        ctx = trace.set_span_in_context(span)
        split_ns = end_ns - round(server * 1e9)
        t = tracer()
        tool_name = span.attributes.get(semconv.GEN_AI_TOOL_NAME) if hasattr(
            span, "attributes") else None
        # "network" is the budget phase that counts as network overhead.
        net = t.start_span("mcp transport", context=ctx, start_time=start_ns,
                           attributes={semconv.COMPONENT: "network",
                                       **semconv.PHASE_SPAN_ATTRIBUTES})
        net.end(end_time=split_ns)
        srv = t.start_span(f"mcp server {tool_name or ''}".strip(), context=ctx,
                           start_time=split_ns,
                           attributes={semconv.COMPONENT: semconv.TOOL_EXECUTION,
                                       semconv.GEN_AI_TOOL_NAME: tool_name or "mcp",
                                       **semconv.PHASE_SPAN_ATTRIBUTES})
        srv.end(end_time=end_ns)
        span.end(end_time=end_ns)




def _session_attributes(session: Any, attributes: dict[str, Any]) -> None:
    """Transport, session id and protocol version of the client session, when known."""
    info = session.__dict__.get("_agent_latency_transport")
    if info is not None:
        attributes[semconv.NETWORK_TRANSPORT] = info[0]
        if info[0] == "tcp":
            attributes[semconv.NETWORK_PROTOCOL_NAME] = "http"
        if info[1] is not None:
            try:
                sid = info[1]()
                if sid:
                    attributes[semconv.MCP_SESSION_ID] = str(sid)
            except Exception:  # noqa: BLE001, S110 - the session id is optional
                pass
    version = getattr(session, "protocol_version", None)
    if isinstance(version, str):
        attributes[semconv.MCP_PROTOCOL_VERSION] = version


def _counted_as_tool(span: trace.Span) -> None:
    # Started without a component (it decides at its end); a failed call is tool time.
    span.set_attribute(semconv.COMPONENT, semconv.TOOL_EXECUTION)
