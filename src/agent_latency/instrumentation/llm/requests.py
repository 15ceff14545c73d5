"""``requests``: OpenAI-compatible calls made with plain ``requests.post`` (the program's own
client, LangChain community clients, vendor SDKs on requests), with the same phases as the
httpx path; their attempts come from the network layer's urllib3 patches.

- **Calls** (``requests.Session.send``, which ``requests.post`` and every session use): a
  ``POST`` to ``…/chat/completions`` or ``…/embeddings`` with a JSON body, when no call of
  ours is current, is one call, read as the openai SDK's chat completions/embeddings are.
  Streamed (``"stream": true`` and requests' ``stream=True``): the response's
  ``iter_content`` (under ``iter_lines`` and ``content``) is watched: each ``data:`` line is
  parsed once to tell output chunks from the others, and the call ends when the body ends
  (or the response is dropped).  Not streamed: the call ends when ``send`` returns, with
  the JSON body read for model, usage and finish reason.
- **Arrival times** (``_wire``): the response's socket reads are tapped below
  ``http.client`` (the network layer's urllib3 patch), so the first and last tokens, and a
  body's last byte, are dated when their bytes arrived, as on the httpx path.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from time import perf_counter
from typing import Any
from urllib.parse import urlsplit

from ..._inject import inject
from ..._log import internal_error
from ..net import CURRENT, sockets_patch, urllib3_targets
from ..protocols import view
from . import LLMInstrumentor, Settings, Target, _wire
from ._call import LLMCall, abandon_call
from ._invoke import Inside, start_call
from ._routes import endpoint_of
from .openai import CHAT, EMBEDDINGS

_instruments = ("requests >= 2.0",)


def _endpoint_of(request: Any) -> Any:
    """The endpoint of an OpenAI-compatible chat completions or embeddings request (the
    ones this layer reads: a stream of ``data:`` lines), or None."""
    if getattr(request, "method", None) != "POST":
        return None
    path = str(getattr(request, "url", "") or "").partition("?")[0].rstrip("/")
    found = endpoint_of(urlsplit(path).path if "://" in path else path)
    if found is None or found[0] not in (CHAT, EMBEDDINGS):
        return None
    return found[0]


def _body_of(request: Any) -> Mapping[str, Any] | None:
    body = getattr(request, "body", None)
    if not isinstance(body, (bytes, str)) or len(body) > 64 * 1024 * 1024:
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _server_of(request: Any) -> tuple[str | None, int | None]:
    try:
        parts = urlsplit(str(request.url))
        return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None, None


def send_wrapper(settings: Settings) -> Any:
    """``requests.Session.send``: a POST to an OpenAI-compatible endpoint is one call."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if CURRENT.get() is not None or not settings.active:
            return wrapped(*args, **kwargs)
        call = None
        try:
            request = args[0] if args else kwargs.get("request")
            endpoint = _endpoint_of(request)
            body = _body_of(request) if endpoint is not None else None
            if body is not None:
                call = start_call(endpoint, settings, body,
                                  streaming=body.get("stream") is True,
                                  server=_server_of(request))
        except Exception:  # noqa: BLE001
            internal_error("requests.send")
        if call is None:
            return wrapped(*args, **kwargs)
        if call.propagate:
            try:
                inject(request.headers, call.context)
            except Exception:  # noqa: BLE001
                internal_error("requests.inject")
        with Inside(call):
            response = wrapped(*args, **kwargs)
        try:
            _handle(call, response, bool(kwargs.get("stream")))
        except Exception:  # noqa: BLE001
            internal_error("requests.response")
            call.finish()
        return response

    return wrapper


class HTTPStatusError(Exception):
    """An OpenAI-compatible endpoint answered with an error status."""


def _handle(call: LLMCall, response: Any, body_unread: bool) -> None:
    status = int(getattr(response, "status_code", 0) or 0)
    if status >= 400:
        call.finish(None, HTTPStatusError(f"HTTP {status}"))
        return
    if call.streaming and body_unread:
        _watch_stream(call, response)
        return
    data: Any = None
    if not call.streaming:
        try:
            data = response.json()
        except ValueError:
            data = None
    call.finish(None, None, view(data) if isinstance(data, Mapping) else None)


def _watch_stream(call: LLMCall, response: Any) -> None:
    """The streamed body through ``iter_content`` (which ``iter_lines`` and ``content`` use)."""
    original = response.iter_content
    call.defer()
    finalizer = weakref.finalize(response, abandon_call, call)
    wire = _wire.StreamMarks(call)
    _wire.start(wire)

    def iter_content(*args: Any, **kwargs: Any) -> Any:
        return _chunks(call, original(*args, **kwargs), finalizer, wire)

    response.iter_content = iter_content


def _end(call: LLMCall, wire: _wire.StreamMarks, error: BaseException | None = None) -> None:
    wire.end()
    call.finish(None, error)


def _chunks(call: LLMCall, source: Any, finalizer: Any, wire: _wire.StreamMarks) -> Any:
    pending = b""
    observe = call.endpoint.observe
    try:
        for piece in source:
            t = perf_counter()
            data = piece.encode() if isinstance(piece, str) else piece
            pending += data
            if b"\n" in data:
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    _line(call, line, t, observe)
                wire.handed_over()
            yield piece
    except BaseException as exc:
        finalizer.detach()
        _end(call, wire, exc if not isinstance(exc, GeneratorExit) else None)
        raise
    if pending:
        _line(call, pending, perf_counter(), observe)
    finalizer.detach()
    _end(call, wire)


def _line(call: LLMCall, line: bytes, t: float, observe: Any) -> None:
    line = line.strip()
    if not line.startswith(b"data:"):
        return
    payload = line[5:].strip()
    if not payload or payload == b"[DONE]":
        return
    try:
        chunk = view(json.loads(payload))
    except ValueError:
        return
    n = call.chunks
    call.chunks = n + 1
    call.t_chunk = t
    if not n:
        call.t_first_chunk = t
        call.first_chunk = chunk
    try:
        if observe is not None and observe(call, chunk):
            if call.t_first is None:
                call.t_first = t
            call.t_last = t
            call.outputs += 1
    except Exception:  # noqa: BLE001
        internal_error("requests.observe")


class RequestsInstrumentor(LLMInstrumentor):
    """OpenAI-compatible calls over ``requests``; attempts over ``urllib3`` for any call."""

    _instruments = _instruments

    # The socket layer only: requests needs neither the httpx send patch nor aiohttp's.
    SHARED = (sockets_patch,)

    def targets(self, settings: Settings) -> list[Target]:
        return [("requests.sessions", "Session.send", send_wrapper(settings)),
                *urllib3_targets]


__all__ = ["HTTPStatusError", "RequestsInstrumentor"]
