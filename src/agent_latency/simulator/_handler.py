"""The HTTP flow every generation endpoint shares: parse, fault, queue, prefill, emit.

Each API module supplies an :class:`ApiSpec` (``parse`` the body into a
:class:`RequestInfo`, and an encoder class that turns timed token chunks into that API's
events or JSON body). Streams send their headers as soon as the body has been read (unless
a ``slow_headers`` fault holds them), then the API's opening events, then one socket write
per chunk at the chunk's deadline.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web

from ._errors import ApiError, error_response, read_json
from ._faults import STATUS, check_overrides
from ._generation import Generation, StreamCut
from ._limits import OVERRIDES
from ._script import Plan, Segment, build_plan
from ._state import ServerState
from ._truth import TruthRecord


class RequestInfo:
    """What a generation request asks for, independent of its API."""

    __slots__ = ("assistant_turns", "body", "include_usage", "input_tokens", "max_tokens",
                 "model", "overrides", "schema", "stream", "tools_allowed")

    def __init__(self, *, body: dict[str, Any], model: str, stream: bool, input_tokens: int,
                 assistant_turns: int, max_tokens: int | None = None,
                 schema: dict[str, Any] | None = None, tools_allowed: bool = True,
                 include_usage: bool = False) -> None:
        self.body = body
        self.model = model
        self.stream = stream
        self.input_tokens = input_tokens
        self.assistant_turns = assistant_turns
        self.max_tokens = max_tokens
        self.schema = schema
        self.tools_allowed = tools_allowed
        self.include_usage = include_usage
        self.overrides = request_overrides(body)


def request_overrides(body: dict[str, Any]) -> dict[str, Any]:
    """The body's ``"simulator"`` settings, checked; ``ApiError(400)`` names a bad one."""
    ext = body.get("simulator")
    if ext is None:
        return {}
    try:
        values = check_overrides(ext, "simulator")
    except ValueError as exc:
        raise ApiError(400, str(exc), param="simulator") from None
    unknown = sorted(set(values) - OVERRIDE_KEYS)
    if unknown:
        raise ApiError(400, f"simulator: unknown settings {unknown}; expected some of "
                       f"{sorted(OVERRIDE_KEYS)}", param="simulator")
    return values


OVERRIDE_KEYS = frozenset(OVERRIDES) | {"fault"}


class Encoder(Protocol):
    """Formats one response; each method returns the events to send."""

    sse_names: bool  # write an ``event:`` line before each ``data:`` line
    done_marker: bytes  # written after the closing events (chat's ``[DONE]``)

    def head(self) -> list[dict[str, Any]]: ...
    def piece(self, index: int, seg: Segment, text: str, first: bool) -> list[dict[str, Any]]: ...
    def tail(self) -> list[dict[str, Any]]: ...
    def body(self) -> dict[str, Any]: ...


class ApiSpec:
    """How one API parses requests, encodes responses and answers status faults.

    ``whole_tool_calls``: a tool call goes out as one chunk when its last token is due
    (Gemini) instead of as argument deltas. ``fault_statuses``: the HTTP status each status
    fault kind gets on this API.  ``frame`` turns a stream's events into bytes (server-sent
    events unless the API frames otherwise: NDJSON, the AWS event stream), sent as
    ``stream_type``; ``body_headers(record)`` adds an API's own headers to a whole body.
    """

    __slots__ = ("body_headers", "encoder", "fault_statuses", "frame", "name", "parse",
                 "stream_type", "whole_tool_calls")

    def __init__(self, name: str, parse: Callable[[dict[str, Any], ServerState], RequestInfo],
                 encoder: Callable[[Generation, RequestInfo], Encoder], *,
                 whole_tool_calls: bool = False,
                 fault_statuses: dict[str, int] | None = None,
                 frame: Callable[[list[dict[str, Any]], bool], bytes] | None = None,
                 stream_type: str = "text/event-stream; charset=utf-8",
                 body_headers: Callable[[TruthRecord], dict[str, str]] | None = None) -> None:
        self.name = name
        self.parse = parse
        self.encoder = encoder
        self.whole_tool_calls = whole_tool_calls
        self.fault_statuses = fault_statuses or STATUS
        self.frame = frame or sse
        self.stream_type = stream_type
        self.body_headers = body_headers


def sse(events: list[dict[str, Any]], named: bool) -> bytes:
    """Frame events as server-sent events."""
    if named:
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()


_BROKEN = b'data: {"id": "broken", "choices": [{"delta": \n\n'
MALFORMED_SSE = {"chat.completions": _BROKEN,
                 "messages": b"event: content_block_delta\n" + _BROKEN,
                 "responses": b"event: response.output_text.delta\n" + _BROKEN,
                 "gemini": _BROKEN,
                 "ollama.chat": b'{"model": "broken", "message": {"content": \n',
                 "ollama.generate": b'{"model": "broken", "response": \n',
                 "cohere.chat": b"event: content-delta\n" + _BROKEN}
_FAULT_MESSAGES = {"rate_limit": "Rate limit reached (simulated).",
                   "server_error": "Internal error (simulated).", "overloaded": "Overloaded"}


def prepare_generation(state: ServerState, api: str, info: RequestInfo,
                       transport: Any, kind: str = "http") -> Generation:
    """Truth record, plan and fault decision for a parsed request."""
    rec = state.new_record(api, info.model, info.stream, transport, kind)
    turn = state.turn_for(info.model, info.assistant_turns)
    rec.turn = info.assistant_turns
    plan: Plan = build_plan(state.config, turn, max_tokens=info.max_tokens,
                            overrides=info.overrides, schema=info.schema,
                            tools_allowed=info.tools_allowed)
    fault = state.faults.pick(plan.fault)
    return Generation(state, rec, plan, info.input_tokens, fault)


def timing_headers(rec: TruthRecord) -> dict[str, str]:
    """TGI-style server-timing headers (milliseconds)."""
    inference = (rec.prefill_s or 0.0) + (rec.output_generation_s or 0.0)
    n = rec.output_tokens or 0
    total = (rec.queue_s or 0.0) + inference
    return {"x-queue-time": f"{(rec.queue_s or 0.0) * 1e3:.3f}",
            "x-inference-time": f"{inference * 1e3:.3f}",
            "x-time-per-token": f"{(inference / n if n else 0.0) * 1e3:.3f}",
            "x-total-time": f"{total * 1e3:.3f}",
            "x-prompt-tokens": str(rec.input_tokens), "x-generated-tokens": str(n)}


def timing_metrics(rec: TruthRecord) -> dict[str, float]:
    """vLLM-style per-request ``metrics`` for a non-streaming body (milliseconds)."""
    n = rec.output_tokens or 0
    gen = rec.output_generation_s or 0.0
    return {"time_to_first_token_ms": ((rec.queue_s or 0.0) + (rec.prefill_s or 0.0)) * 1e3,
            "generation_time_ms": gen * 1e3, "queue_time_ms": (rec.queue_s or 0.0) * 1e3,
            "mean_itl_ms": gen / (n - 1) * 1e3 if n > 1 else 0.0,
            "tokens_per_second": (n - 1) / gen if n > 1 and gen > 0 else 0.0}


async def serve(request: web.Request, state: ServerState, spec: ApiSpec) -> web.StreamResponse:
    """Handle one generation request end to end."""
    path = request.path
    try:
        body = await read_json(request)
        info = spec.parse(body, state)
    except ApiError as exc:
        return error_response(path, exc.status, exc.message, param=exc.param)
    gen = prepare_generation(state, spec.name, info, request.transport)
    rec = gen.record
    rec.traceparent = request.headers.get("traceparent")  # W3C context the client sent
    status = 200
    try:
        fault = gen.fault
        if fault is not None and fault.kind in STATUS:
            status = spec.fault_statuses[fault.kind]
            rec.output_tokens = 0
            headers = ({"retry-after": f"{fault.retry_after:g}"}
                       if fault.kind in ("rate_limit", "overloaded") else {})
            return error_response(path, status, _FAULT_MESSAGES[fault.kind],
                                  request_id=rec.request_id, headers=headers)
        await gen.delay_headers()
        encoder = spec.encoder(gen, info)
        headers = {"x-request-id": rec.request_id}
        if spec.name == "messages":
            headers["request-id"] = rec.request_id
        if info.stream:
            return await _stream(request, gen, encoder, headers, spec)
        await gen.admit()
        await gen.generate_silently()
        if fault is not None and fault.kind == "malformed":
            text = '{"id": "broken", "choices": ['
        else:
            payload = encoder.body()
            if state.config.server_timing:
                payload["metrics"] = timing_metrics(rec)
            text = json.dumps(payload)
        if state.config.server_timing:
            headers.update(timing_headers(rec))
        if spec.body_headers is not None:
            headers.update(spec.body_headers(rec))
        resp = web.Response(text=text, content_type="application/json", headers=headers)
        await resp.prepare(request)
        await resp.write_eof()
        rec.mark("response_written_at")
        return resp
    except ConnectionError:
        # The client hung up before (or while) the response went out. Returning a
        # response lets aiohttp's own ConnectionError handling end the request quietly;
        # raising would make it log "Error handling request" with a traceback.
        status = 499
        return web.Response(status=499)
    except asyncio.CancelledError:
        status = 499  # client went away
        raise
    finally:
        gen.finish(status)


async def _stream(request: web.Request, gen: Generation, encoder: Encoder,
                  headers: dict[str, str], spec: ApiSpec) -> web.StreamResponse:
    headers = {**headers, "Content-Type": spec.stream_type, "Cache-Control": "no-cache"}
    resp = web.StreamResponse(headers=headers)
    await resp.prepare(request)
    named = encoder.sse_names
    frame = spec.frame
    opening = frame(encoder.head(), named)
    if opening:
        await resp.write(opening)
    await gen.admit()

    async def write(index: int, seg: Segment, text: str, first: bool) -> None:
        await resp.write(frame(encoder.piece(index, seg, text, first), named))

    async def malformed() -> None:
        await resp.write(MALFORMED_SSE.get(spec.name, _BROKEN))

    try:
        await gen.stream(write, malformed, whole_tool_calls=spec.whole_tool_calls)
        await resp.write(frame(encoder.tail(), named) + encoder.done_marker)
        await resp.write_eof()
    except StreamCut:
        if request.transport is not None:
            request.transport.close()
        return resp
    except ConnectionError:
        # the client hung up mid-stream (e.g. after a malformed chunk): no traceback
        gen.record.status = 499
        return resp
    gen.record.mark("response_written_at")
    return resp
