"""Ollama's native protocol (``ollama`` serve).

- Endpoints: ``POST /api/chat`` (``messages``), ``/api/generate`` (``prompt``) and
  ``/api/embed`` / ``/api/embeddings``; the JSON body names ``model``; a reply streams
  unless the body says ``"stream": false``.
- Framing: newline-delimited JSON (``application/x-ndjson``), one object a line; the last has
  ``"done": true``.
- Output: a line with non-empty ``message.content`` / ``message.thinking`` (chat) or
  ``response`` / ``thinking`` (generate), or ``message.tool_calls``.
- Usage: ``prompt_eval_count`` and ``eval_count`` on the last line; server timings, in
  nanoseconds, beside them: ``prompt_eval_duration`` (prefill), ``eval_duration`` (output
  generation), ``load_duration`` (loading the model) and ``total_duration``.
"""

from __future__ import annotations

from typing import Any

from ... import semconv
from ._endpoint import Endpoint, int_or_none, seconds
from ._events import OutputRule, classifier
from ._framing import NDJSON
from ._protocol import Route, WireProtocol

OUTPUT = OutputRule(text_fields=("content", "thinking", "response"),
                    call_fields=("tool_calls",))
_NS = 1e-9


def _observe(state: Any, chunk: Any) -> bool:
    if chunk.done:
        state.meta_chunk = chunk
    message = chunk.message
    if message is not None:
        if message.content or message.thinking or message.tool_calls:
            if state.content is not None and message.content:
                state.content.append(message.content)
            return True
        return False
    if chunk.response or chunk.thinking:
        if state.content is not None and chunk.response:
            state.content.append(chunk.response)
        return True
    return False


def _final(call: Any, obj: Any) -> None:
    """The last line (or the whole reply): model, finish reason, usage, server timings."""
    info = call.info
    info.response_model = info.response_model or obj.model
    if obj.done_reason:
        info.finish_reasons = [str(obj.done_reason)]
    info.input_tokens = int_or_none(obj.prompt_eval_count)
    info.output_tokens = int_or_none(obj.eval_count)
    info.server_prefill = seconds(obj.prompt_eval_duration, _NS)
    info.server_generation = seconds(obj.eval_duration, _NS)
    info.server_load = seconds(obj.load_duration, _NS)
    info.server_total = seconds(obj.total_duration, _NS)


def _response(call: Any, obj: Any) -> None:
    _final(call, obj)
    if call.capture:
        message = obj.message
        call.info.output_text = message.content if message is not None else obj.response


def _stream(call: Any) -> None:
    for chunk in (call.meta_chunk, call.first_chunk):
        if chunk is not None:
            _final(call, chunk)
            return


def _embed_response(call: Any, obj: Any) -> None:
    call.info.response_model = obj.model
    call.info.input_tokens = int_or_none(obj.prompt_eval_count)


CHAT = Endpoint(semconv.PROVIDER_OLLAMA, semconv.OPERATION_CHAT, observe=_observe,
                from_response=_response, from_stream=_stream)
GENERATE = Endpoint(semconv.PROVIDER_OLLAMA, semconv.OPERATION_TEXT_COMPLETION,
                    observe=_observe, from_response=_response, from_stream=_stream)
EMBEDDINGS = Endpoint(semconv.PROVIDER_OLLAMA, semconv.OPERATION_EMBEDDINGS,
                      from_response=_embed_response, streams=False)

_ROUTES = {"/api/chat": Route(CHAT), "/api/generate": Route(GENERATE),
           "/api/embed": Route(EMBEDDINGS), "/api/embeddings": Route(EMBEDDINGS)}


def route(path: str) -> Route | None:
    """The endpoint a ``POST`` to ``path`` is, if it is one of this protocol's."""
    return _ROUTES.get(path[path.find("/api/"):]) if "/api/" in path else None


PROTOCOL = WireProtocol("ollama", route, classifier(OUTPUT), semconv.PROVIDER_OLLAMA, NDJSON)
