"""Model requests seen on the wire, whatever the client: an HTTP/1.1 ``POST`` written on a
plain or TLS socket (``http.client``, ``urllib.request``, a client of its own on the standard
library's sockets such as the one dspy bundles, or any library no other layer of ours sees)
to a model endpoint is one call, with the phases of every other call.

The network layer (:mod:`..net._exchanges`) shows each ``POST`` written while no call of
ours is current to :func:`recognise`; a path it knows becomes a call:

- OpenAI-compatible ``…/chat/completions``, ``…/completions``, ``…/embeddings``,
  ``…/responses``; Anthropic ``…/v1/messages``; Gemini ``…:generateContent`` and
  ``…:streamGenerateContent``.
- ``traceparent`` is written right after the request line (unless the request has one).
- The request's JSON body gives the model (Gemini: the path), ``stream`` and the request
  parameters; the span is renamed once it is read (a client may write the body after the
  head).
- The response: a ``text/event-stream`` body is read event by event as the bytes come off
  the socket — which events carry output is read from the bytes
  (:mod:`._output_events`), so the first and last output tokens are dated when the read
  returned them; the first event and the last few are parsed once, at the end, for model,
  usage and finish reasons.  A JSON body is parsed once, when its last byte is read.

A call starts where its request's new connection started (DNS, connect and TLS from the
socket layer) or at its first byte on a pooled connection, and ends with the response's last
byte.  Content is not captured at this layer.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from opentelemetry import propagate

from ... import semconv
from ..._log import internal_error
from ..net import Attempt, Request, exchanges_patch, follow, recognise_with
from . import (
    Endpoint,
    Info,
    LLMCall,
    LLMInstrumentor,
    Settings,
    Target,
    _wire,
    google_genai,
    int_or_none,
)
from ._output_events import is_output_event
from .anthropic import MESSAGES
from .openai import CHAT, EMBEDDINGS, RESPONSES
from .requests import HTTPStatusError

# The last events of a stream kept (unparsed) for its model, usage and finish reasons.
_TAIL = 4
# A request body longer than this is not parsed whole (it is read in the writer's thread,
# while the server works): its top-level fields are looked for in its first and last bytes.
_PARSE_CAP = 256 * 1024
_EDGE = 64 * 1024
# A JSON response body longer than this is not kept (nor parsed): no model or usage.
_RESPONSE_CAP = 2 * 1024 * 1024
_FIELD = re.compile(rb'"(model|stream|max_tokens|max_completion_tokens|max_output_tokens|'
                    rb'maxOutputTokens|temperature)"\s*:\s*("(?:[^"\\]|\\.)*"|true|false|'
                    rb'-?[0-9.eE+-]+)')
# An SSE event longer than this is not waited for whole.
_EVENT_CAP = 1 << 20


# -- the legacy completions endpoint --------------------------------------------------------
def _completions_observe(state: Any, chunk: Any) -> bool:
    choices = chunk.choices
    if choices:
        choice = choices[0]
        if choice.finish_reason is not None:
            state.meta_chunk = chunk
        if chunk.usage is not None:
            state.usage_chunk = chunk
        return bool(choice.text)
    state.usage_chunk = chunk
    return False


def _completions_usage(info: Info, usage: Any) -> None:
    if usage is not None:
        info.input_tokens = int_or_none(getattr(usage, "prompt_tokens", None))
        info.output_tokens = int_or_none(getattr(usage, "completion_tokens", None))


def _completions_response(call: LLMCall, obj: Any) -> None:
    info = call.info
    info.response_model = getattr(obj, "model", None)
    info.response_id = getattr(obj, "id", None)
    info.finish_reasons = [c.finish_reason for c in getattr(obj, "choices", None) or ()
                           if c.finish_reason]
    _completions_usage(info, getattr(obj, "usage", None))


def _completions_stream(call: LLMCall) -> None:
    info = call.info
    for chunk in (call.usage_chunk, call.meta_chunk, call.first_chunk):
        if chunk is not None:
            info.response_model = info.response_model or getattr(chunk, "model", None)
            info.response_id = info.response_id or getattr(chunk, "id", None)
    if call.meta_chunk is not None:
        info.finish_reasons = [c.finish_reason for c in call.meta_chunk.choices
                               if c.finish_reason]
    _completions_usage(info, getattr(call.usage_chunk, "usage", None))


COMPLETIONS = Endpoint(semconv.PROVIDER_OPENAI, semconv.OPERATION_TEXT_COMPLETION,
                       observe=_completions_observe, from_response=_completions_response,
                       from_stream=_completions_stream)


# -- which requests are calls -------------------------------------------------------------------
_SUFFIXES = (("/chat/completions", CHAT), ("/completions", COMPLETIONS),
             ("/embeddings", EMBEDDINGS), ("/responses", RESPONSES),
             ("/v1/messages", MESSAGES))


def endpoint_of(path: str) -> tuple[Endpoint, str, bool] | None:
    """``(endpoint, model named by the path or "", streams by the path)`` for a request
    path, or None when it is not a model request."""
    path = path.rstrip("/")
    if ":" in path:
        base, _, method = path.rpartition(":")
        if method in ("generateContent", "streamGenerateContent"):
            model = base.rpartition("/models/")[2] if "/models/" in base else ""
            return google_genai.CHAT, model, method == "streamGenerateContent"
        return None
    for suffix, endpoint in _SUFFIXES:
        if path.endswith(suffix):
            return endpoint, "", False
    return None


# -- JSON read like an SDK's models --------------------------------------------------------------
@lru_cache(maxsize=256)
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class _Json:
    """A JSON object read like an SDK model: ``obj.field`` (None when absent; a Gemini
    field's ``camelCase`` spelling for its ``snake_case`` name); ``model_extra`` is the
    object itself (fields an SDK model would not declare)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        data = self._data
        if name == "model_extra":
            return data
        value = data.get(name)
        if value is None and "_" in name:
            value = data.get(_camel(name))
        return _json(value)


def _json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _Json(value)
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value


def _event_json(event: bytes) -> Any:
    """The JSON object an SSE event's ``data:`` lines carry, or None."""
    payload = b"\n".join(line[5:].strip() for line in event.split(b"\n")
                         if line.startswith(b"data:"))
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    return _Json(data) if isinstance(data, Mapping) else None


class _Head:
    """A response's headers where the core reads an SDK response's (``.headers``)."""

    __slots__ = ("headers",)

    def __init__(self, headers: Mapping[str, str]) -> None:
        self.headers = headers


_REQUEST_ATTRIBUTES = (("max_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
                       ("max_completion_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
                       ("max_output_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
                       ("maxOutputTokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
                       ("temperature", semconv.GEN_AI_REQUEST_TEMPERATURE))


# -- one call on the wire ---------------------------------------------------------------------
class WireCall:
    """One model request seen on the wire: the network layer's observer of its exchange."""

    __slots__ = ("body", "call", "first", "inject", "marks", "pending", "sse", "status", "tail")

    def __init__(self, call: LLMCall, inject: bool) -> None:
        self.call = call
        # A stream's arrival times (``_wire``), from when it is known to stream.
        self.marks: _wire.StreamMarks | None = None
        self.inject = inject and call.propagate
        self.status = 0
        self.sse = False
        self.body: list[bytes] | None = []
        self.pending = b""
        self.first: bytes | None = None
        self.tail: deque[bytes] = deque(maxlen=_TAIL)

    # -- the request -----------------------------------------------------------------------
    def add_attempt(self, attempt: Attempt) -> None:
        call = self.call
        call.add_attempt(attempt)
        if call.wants_arrivals and attempt.following is None:
            # Its reads dated from the kernel's receive stamps (the network layer's tap on
            # the exchange), as an SDK's are: a body's last byte, a stream's tokens.
            attempt.following = follow(attempt, call.classify_event)
        if call.streaming:
            self._stream_window()

    def _stream_window(self) -> None:
        """The call streams: its first token is watched for from now on (the client may be
        busy when it lands: a process's first parse, another thread, a collection)."""
        if self.marks is None:
            self.marks = marks = _wire.StreamMarks(self.call)
            _wire.start(marks)

    def header_lines(self) -> bytes:
        if not self.inject:
            return b""
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=self.call.context)
        return b"".join(f"{name}: {value}\r\n".encode("latin-1")
                        for name, value in carrier.items())

    def request_body(self, body: bytes | None) -> None:
        if not body:
            return
        if len(body) > _PARSE_CAP:
            _read_request(self.call, _edge_fields(body))
            return
        try:
            data = json.loads(body)
        except ValueError:
            return
        if isinstance(data, Mapping):
            _read_request(self.call, data)
        if self.call.streaming:
            self._stream_window()

    # -- the response ---------------------------------------------------------------------
    def response_head(self, status: int, headers: dict[str, str], t: float) -> None:
        call = self.call
        self.status = status
        self.sse = headers.get("content-type", "").startswith("text/event-stream")
        if call.attempts:
            call.attempts[-1].response = _Head(headers)
        if self.sse and not call.streaming:
            call.streaming = True
            call.span.set_attributes({semconv.GEN_AI_REQUEST_STREAM: True,
                                      semconv.LLM_STREAMING: True})
        if call.streaming:
            self._stream_window()
        call.defer()

    def response_data(self, data: bytes, t: float) -> None:
        if not self.sse:
            body = self.body
            if body is not None:
                body.append(data)
                if len(body) > 64:
                    # (many small reads: joined as they come, so the list stays short)
                    joined = b"".join(body)
                    self.body = [joined] if len(joined) <= _RESPONSE_CAP else None
            return
        buf = self.pending + data if self.pending else data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        start = 0
        find = buf.find
        while True:
            end = find(b"\n\n", start)
            if end < 0:
                break
            self._event(buf[start:end], t)
            start = end + 2
        rest = buf[start:]
        self.pending = rest if len(rest) <= _EVENT_CAP else b""
        if self.marks is not None:
            self.marks.handed_over()

    def _event(self, event: bytes, t: float) -> None:
        if b"data:" not in event or b"[DONE]" in event or b"event: ping" in event:
            return
        call = self.call
        n = call.chunks
        call.chunks = n + 1
        call.t_chunk = t
        if not n:
            call.t_first_chunk = t
            self.first = event
        else:
            self.tail.append(event)
        if is_output_event(event):
            if call.t_first is None:
                call.t_first = t
            call.t_last = t
            call.outputs += 1

    def response_end(self, t: float, error: BaseException | None) -> None:
        call = self.call
        if error is None and self.status >= 400:
            error = HTTPStatusError(f"HTTP {self.status}")
        response = None
        try:
            if self.sse:
                _read_events(call, self.first, self.tail)
            elif error is None and self.body is not None:
                data = json.loads(b"".join(self.body) or b"null")
                response = _Json(data) if isinstance(data, Mapping) else None
        except Exception:  # noqa: BLE001 - a body we cannot read still ends the call
            response = None
        self.body = None
        self.first = None
        self.tail.clear()
        marks, self.marks = self.marks, None
        if marks is not None:
            marks.end()
        call.finish(t, error, response)


def _read_request(call: LLMCall, data: Mapping[str, Any]) -> None:
    """The request body's model, ``stream`` and parameters onto the call and its span."""
    call.kwargs = data
    attrs: dict[str, Any] = {}
    model = data.get("model")
    if isinstance(model, str) and model and not call.model:
        call.model = model
        attrs[semconv.GEN_AI_REQUEST_MODEL] = model
        call.span.update_name(f"{call.endpoint.operation} {model}")
    if data.get("stream") is True and not call.streaming:
        call.streaming = True
        attrs[semconv.GEN_AI_REQUEST_STREAM] = attrs[semconv.LLM_STREAMING] = True
    params = data.get("generationConfig")
    for source in (data, params if isinstance(params, Mapping) else {}):
        for key, attr in _REQUEST_ATTRIBUTES:
            value = source.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attrs[attr] = value
    if attrs:
        call.span.set_attributes(attrs)


def _edge_fields(body: bytes) -> dict[str, Any]:
    """A long request body's parameters, from its first and last bytes (where a client puts
    them: before or after the messages), without parsing it all."""
    fields: dict[str, Any] = {}
    for edge in (body[-_EDGE:], body[:_EDGE]):  # the head's win
        for match in _FIELD.finditer(edge):
            try:
                fields[match.group(1).decode()] = json.loads(match.group(2))
            except ValueError:
                continue
    return fields


def _read_events(call: LLMCall, first: bytes | None, tail: deque[bytes]) -> None:
    """The first event and the last ones, parsed once, through the endpoint's reader."""
    observe = call.endpoint.observe
    for i, event in enumerate((first, *tail)):
        if event is None:
            continue
        chunk = _event_json(event)
        if chunk is None:
            continue
        if i == 0:
            call.first_chunk = chunk
        if observe is not None:
            try:
                observe(call, chunk)
            except Exception:  # noqa: BLE001, S110 - an odd event lacks a field: skipped
                pass


def accepts(path: str) -> bool:
    """Whether a request path is a model endpoint's (asked for every POST written)."""
    return endpoint_of(path) is not None


def recogniser(settings: Settings) -> Any:
    """The network layer's recogniser: a request to a model endpoint becomes a call."""

    def recognise(request: Request) -> WireCall | None:
        if not settings.active:
            return None
        found = endpoint_of(request.path)
        if found is None:
            return None
        endpoint, model, streams = found
        try:
            call = LLMCall(endpoint, settings, model, {}, streaming=streams,
                           server=(request.host or None, request.port),
                           t_call=request.t_start)
        except Exception:  # noqa: BLE001
            internal_error("wire.call")
            return None
        return WireCall(call, "traceparent" not in request.headers)

    return recognise


class SocketsInstrumentor(LLMInstrumentor):
    """Model requests written on plain and TLS sockets that no other layer of ours sees."""

    _instruments = ()
    # The socket layer's own patch only: the recogniser sees what no other layer of ours has.
    SHARED = (exchanges_patch,)

    def setup(self, **kwargs: Any) -> None:
        super().setup(**kwargs)
        recognise_with(recogniser(self._settings), accepts)

    def _uninstrument(self, **kwargs: Any) -> None:
        super()._uninstrument(**kwargs)
        recognise_with(None)

    def targets(self, settings: Settings) -> list[Target]:
        return []


__all__ = ["COMPLETIONS", "SocketsInstrumentor", "WireCall", "accepts", "endpoint_of", "recogniser"]
