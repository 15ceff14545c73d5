"""Model requests seen on the wire, whatever the client: an HTTP/1.1 ``POST`` written on a
plain or TLS socket (``http.client``, ``urllib.request``, a client of its own on the standard
library's sockets such as the one dspy bundles, or any library no other layer of ours sees)
to a model endpoint is one call, with the phases of every other call.

The network layer (:mod:`..net._exchanges`) shows each ``POST`` written while no call of
ours is current to :func:`recognise`; a path one of the protocols knows
(:mod:`..protocols`: OpenAI-compatible, Anthropic, Gemini, Ollama, Cohere v2, Bedrock
runtime) becomes a call:

- ``traceparent`` is written right after the request line (unless the request has one).
- The provider is the host's where it is a known provider's, else the client library's
  (its ``User-Agent``), else the protocol's.
- The request's JSON body gives the model (Gemini, Bedrock: the path), ``stream`` and the
  request parameters; the span is renamed once it is read (a client may write the body after
  the head).
- The response: a streamed body (server-sent events, NDJSON, the AWS event stream, by its
  ``Content-Type``) is cut into events as the bytes come off the socket — which events carry
  output is the protocol's rule, read from the bytes, so the first and last output tokens
  are dated when the read returned them; the first event and the last few are parsed once,
  at the end, for model, usage, finish reasons and server timings.  A JSON body is parsed
  once, when its last byte is read.  A body that breaks its framing or is not JSON ends the
  call with ``error.type`` ``MalformedResponse``; the program's own read is untouched.
- Never silent: a ``POST`` to a path no protocol knows whose JSON body looks like a model
  request (``protocols._generic``) becomes a generic call (provider unknown, the first
  response byte as its first token, ``agent_latency.llm.protocol`` ``generic``), with one
  notice per host and path per process; ``AGENT_LATENCY_GENERIC_CALLS=off`` turns both off.
  Its body is read before it is taken, so no ``traceparent`` is written into it.

A call starts where its request's new connection started (DNS, connect and TLS from the
socket layer) or at its first byte on a pooled connection, and ends with the response's last
byte.  Content is not captured at this layer.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from typing import Any

from ... import semconv
from ..._env import env_flag
from ..._inject import inject
from ..._log import internal_error, warn_once
from ..net import Attempt, Request, exchanges_patch, follow, recognise_with
from ..protocols import (
    GENERIC,
    PROMPT_FIELDS,
    Endpoint,
    Json,
    MalformedResponse,
    WireProtocol,
    event_json,
    framer_for,
    framing_of,
    looks_like_model_request,
    match,
    provider_of,
)
from ..protocols._framing import Framer
from ..protocols.openai import COMPLETIONS
from . import LLMCall, LLMInstrumentor, Settings, Target, _wire
from ._routes import endpoint, endpoint_of
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


#: The protocol of a generic call: every response byte is output.
GENERIC_PROTOCOL = WireProtocol(semconv.PROTOCOL_GENERIC, lambda path: None,
                                lambda event: False, semconv.PROVIDER_UNKNOWN, "")


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

    __slots__ = ("body", "call", "done", "ended", "first", "framer", "generic", "inject",
                 "is_output", "marks", "status", "tail")

    def __init__(self, call: LLMCall, protocol: WireProtocol, inject: bool) -> None:
        self.call = call
        # A stream's arrival times (``_wire``), from when it is known to stream.
        self.marks: _wire.StreamMarks | None = None
        self.inject = inject and call.propagate
        self.is_output = protocol.is_output
        self.generic = protocol is GENERIC_PROTOCOL
        self.status = 0
        self.framer: Framer | None = None
        self.body: list[bytes] | None = []
        self.first: bytes | None = None
        self.tail: deque[bytes] = deque(maxlen=_TAIL)
        # Whether the stream's own end (``data: [DONE]``) was read; whether the call ended.
        self.done = False
        self.ended = False
        call.span.set_attribute(semconv.LLM_PROTOCOL, protocol.name)

    # -- the request -----------------------------------------------------------------------
    def add_attempt(self, attempt: Attempt) -> None:
        call = self.call
        call.add_attempt(attempt)
        if call.wants_arrivals and attempt.following is None:
            # Its reads dated from the kernel's receive stamps (the network layer's tap on
            # the exchange), as an SDK's are: a body's last byte, a stream's tokens.
            attempt.following = follow(attempt, self.is_output)
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
        inject(carrier, self.call.context)
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
        framing = framing_of(headers.get("content-type", ""))
        self.framer = framer_for(framing) if status < 400 else None
        if call.attempts:
            call.attempts[-1].response = _Head(headers)
        if self.framer is not None and not call.streaming:
            call.streaming = True
            call.span.set_attributes({semconv.GEN_AI_REQUEST_STREAM: True,
                                      semconv.LLM_STREAMING: True})
        if call.streaming:
            self._stream_window()
        call.defer()

    def response_data(self, data: bytes, t: float) -> None:
        if self.generic:
            call = self.call
            if call.t_first is None:
                call.t_first = t
                call.outputs = 1
            call.t_last = t
        framer = self.framer
        if framer is None:
            body = self.body
            if body is not None:
                body.append(data)
                if len(body) > 64:
                    # (many small reads: joined as they come, so the list stays short)
                    joined = b"".join(body)
                    self.body = [joined] if len(joined) <= _RESPONSE_CAP else None
            return
        for event in framer.feed(data):
            self._event(event, t)
        if self.marks is not None:
            self.marks.handed_over()
        if self.done:
            self._stream_done(t)

    def _stream_done(self, t: float) -> None:
        """The stream's own end (an OpenAI-compatible ``data: [DONE]``) was read at ``t``: the
        call ends with it.  A client may stop reading there: huggingface_hub's
        ``InferenceClient`` breaks on it and keeps the response open until the client
        closes, so the HTTP body's last chunk, sent a moment later, stays unread; waiting
        for it left the span open (none exported while the program ran on), then cut."""
        attempts = self.call.attempts
        if attempts:
            attempt = attempts[-1]
            attempt.t_body_done = attempt.t_received = t
        self.response_end(t, None)

    def _event(self, event: bytes, t: float) -> None:
        # ``find``, not ``in``: bytes' ``in`` first tries its operand as an integer and builds
        # (then drops) a TypeError, about as dear as the search itself.
        find = event.find
        if find(b"data:") < 0 or find(b"[DONE]") >= 0 or find(b"event: ping") >= 0:
            if event.replace(b" ", b"") == b"data:[DONE]":
                self.done = True
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
        if not self.generic and self.is_output(event):
            if call.t_first is None:
                call.t_first = t
            call.t_last = t
            call.outputs += 1

    def response_end(self, t: float, error: BaseException | None) -> None:
        if self.ended:
            return  # ended at the stream's own end (its body's last chunk came later)
        self.ended = True
        call = self.call
        if error is None and self.status >= 400:
            error = HTTPStatusError(f"HTTP {self.status}")
        response = None
        framer = self.framer
        try:
            if framer is not None:
                framer.close()
                if error is None:
                    error = framer.error
                _read_events(call, self.first, self.tail)
            elif error is None and self.body is not None:
                data = _body_json(b"".join(self.body))
                response = Json(data) if isinstance(data, Mapping) else None
        except MalformedResponse as exc:
            error = exc
        except Exception:  # noqa: BLE001 - a body we cannot read still ends the call
            response = None
        self.body = None
        self.first = None
        self.tail.clear()
        marks, self.marks = self.marks, None
        if marks is not None:
            marks.end()
        call.finish(t, error, response)


def _body_json(body: bytes) -> Any:
    """A whole response body's JSON (an empty body: None)."""
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        raise MalformedResponse(f"the response body ({len(body)} bytes) is not JSON") from None


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
        for field in _FIELD.finditer(edge):
            try:
                fields[field.group(1).decode()] = json.loads(field.group(2))
            except ValueError:
                continue
    return fields


def _read_events(call: LLMCall, first: bytes | None, tail: deque[bytes]) -> None:
    """The first event and the last ones, parsed once, through the endpoint's reader."""
    observe = call.endpoint.observe
    for i, event in enumerate((first, *tail)):
        if event is None:
            continue
        chunk = event_json(event)
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
    """Whether a request path is a known model endpoint's (asked for every POST written)."""
    return match(path) is not None


def _any_path(path: str) -> bool:
    return True


def _call_for(settings: Settings, request: Request, protocol: WireProtocol, endpoint: Endpoint,
              model: str, streams: bool) -> LLMCall | None:
    try:
        provider = provider_of(protocol.provider, request.host or None, request.port,
                               request.headers)
        return LLMCall(endpoint, settings, model, {}, streaming=streams,
                       server=(request.host or None, request.port), provider=provider,
                       t_call=request.t_start)
    except Exception:  # noqa: BLE001
        internal_error("wire.call")
        return None


class Candidate:
    """A JSON ``POST`` to a path no protocol knows: a generic call once its body shows a
    model request (names a model with messages, a prompt, input or contents; or a prompt
    with generation parameters), nothing otherwise."""

    __slots__ = ("attempt", "let_go", "request", "settings", "wire")

    def __init__(self, settings: Settings, request: Request) -> None:
        self.settings = settings
        self.request = request
        self.attempt: Attempt | None = None
        self.wire: WireCall | None = None
        # Not a model request: the network layer lets the exchange go (no response read).
        self.let_go = False

    def add_attempt(self, attempt: Attempt) -> None:
        self.attempt = attempt

    def header_lines(self) -> bytes:
        return b""  # (not known to be a call yet: nothing is written into it)

    def request_body(self, body: bytes | None) -> None:
        attempt, self.attempt = self.attempt, None
        self.let_go = True
        if (not body or body[:1] not in b"{ \t\r\n" or len(body) > _PARSE_CAP
                or _PROMPT_FIELD.search(body) is None):
            return
        try:
            data = json.loads(body)
        except ValueError:
            return
        if not looks_like_model_request(data):
            return
        request = self.request
        call = _call_for(self.settings, request, GENERIC_PROTOCOL, GENERIC, "",
                         data.get("stream") is True)
        if call is None:
            return
        self.let_go = False
        warn_once(f"generic:{request.host}:{request.port}{request.path}",
                  "agent-latency: a model request to %s:%s%s matched no known protocol; it is "
                  "recorded as a generic LLM span (provider unknown, the first response byte "
                  "as its first token). %s=off turns this off.", request.host, request.port,
                  request.path, semconv.ENV_GENERIC_CALLS)
        wire = self.wire = WireCall(call, GENERIC_PROTOCOL, False)
        if attempt is not None:
            wire.add_attempt(attempt)
        _read_request(call, data)

    def response_head(self, status: int, headers: dict[str, str], t: float) -> None:
        if self.wire is not None:
            self.wire.response_head(status, headers, t)

    def response_data(self, data: bytes, t: float) -> None:
        if self.wire is not None:
            self.wire.response_data(data, t)

    def response_end(self, t: float, error: BaseException | None) -> None:
        if self.wire is not None:
            self.wire.response_end(t, error)


# Request bodies of these types are not JSON: never a candidate (OTLP's protobuf, uploads).
_NOT_JSON = re.compile(r"protobuf|grpc|multipart|octet-stream|xml|html|image/|audio/|video/",
                       re.IGNORECASE)
# A body without one of these fields is no model request: not parsed.
_PROMPT_FIELD = re.compile(rb'"(?:' + "|".join(PROMPT_FIELDS).encode() + rb')"\s*:')


def _may_be_json(content_type: str) -> bool:
    """Whether a body of this type may be a JSON model request (programs posting JSON often
    leave the type out, or keep urllib's form default)."""
    return _NOT_JSON.search(content_type) is None


def recogniser(settings: Settings, generic: bool = False) -> Any:
    """The network layer's recogniser: a request to a model endpoint becomes a call; with
    ``generic``, a JSON request no protocol knows is a :class:`Candidate`."""

    def recognise(request: Request) -> WireCall | Candidate | None:
        if not settings.active:
            return None
        found = match(request.path)
        if found is None:
            if generic and _may_be_json(request.headers.get("content-type", "")):
                return Candidate(settings, request)
            return None
        protocol, route = found
        call = _call_for(settings, request, protocol, endpoint(route), route.model,
                         route.streams)
        if call is None:
            return None
        return WireCall(call, protocol, "traceparent" not in request.headers)

    return recognise


class SocketsInstrumentor(LLMInstrumentor):
    """Model requests written on plain and TLS sockets that no other layer of ours sees."""

    _instruments = ()
    # The socket layer's own patch only: the recogniser sees what no other layer of ours has.
    SHARED = (exchanges_patch,)

    def setup(self, **kwargs: Any) -> None:
        super().setup(**kwargs)
        generic = env_flag(semconv.ENV_GENERIC_CALLS, True)
        recognise_with(recogniser(self._settings, generic), _any_path if generic else accepts)

    def _uninstrument(self, **kwargs: Any) -> None:
        super()._uninstrument(**kwargs)
        recognise_with(None)

    def targets(self, settings: Settings) -> list[Target]:
        return []


__all__ = ["COMPLETIONS", "Candidate", "SocketsInstrumentor", "WireCall", "accepts", "endpoint_of",
           "recogniser"]
