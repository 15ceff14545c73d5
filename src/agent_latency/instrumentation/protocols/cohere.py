"""Cohere's v2 protocol (``cohere`` ``ClientV2``).

- Endpoints: ``POST /v2/chat`` (``model``, ``messages``, ``stream``) and ``/v2/embed``.
- Framing: server-sent events whose JSON names its ``type``: ``message-start``,
  ``content-start``, ``content-delta``, ``content-end``, ``tool-plan-delta``,
  ``tool-call-start`` / ``-delta`` / ``-end``, ``citation-start`` / ``-end``, ``message-end``.
- Output: ``content-delta``, ``tool-plan-delta``, ``tool-call-start`` and ``tool-call-delta``.
- Usage: ``usage.tokens`` (or ``usage.billed_units``) ``.input_tokens`` / ``.output_tokens``
  on the reply, or on ``message-end``'s ``delta``; no server timings.
"""

from __future__ import annotations

from typing import Any

from ... import semconv
from ._endpoint import Endpoint, int_or_none
from ._events import OutputRule, classifier
from ._framing import SSE
from ._protocol import Route, WireProtocol

_OUTPUT_TYPES = frozenset({"content-delta", "tool-plan-delta", "tool-call-start",
                           "tool-call-delta"})
OUTPUT = OutputRule(output_types=_OUTPUT_TYPES)


def _observe(state: Any, chunk: Any) -> bool:
    kind = chunk.type
    if kind in _OUTPUT_TYPES:
        if state.content is not None and kind == "content-delta":
            content = getattr(getattr(chunk.delta, "message", None), "content", None)
            text = getattr(content, "text", None)
            if text:
                state.content.append(text)
        return True
    if kind == "message-end":
        state.meta_chunk = chunk
    return False


def _usage(info: Any, usage: Any) -> None:
    if usage is None:
        return
    for tokens in (usage.tokens, usage.billed_units):
        if tokens is not None and tokens.output_tokens is not None:
            info.input_tokens = int_or_none(tokens.input_tokens)
            info.output_tokens = int_or_none(tokens.output_tokens)
            return


def _response(call: Any, obj: Any) -> None:
    info = call.info
    info.response_id = obj.id
    if obj.finish_reason:
        info.finish_reasons = [str(obj.finish_reason)]
    _usage(info, obj.usage)
    if call.capture and obj.message is not None:
        info.output_text = "".join(c.text or "" for c in obj.message.content or ())


def _stream(call: Any) -> None:
    info = call.info
    first = call.first_chunk
    if first is not None:
        info.response_id = first.id
    meta = call.meta_chunk
    if meta is not None and meta.delta is not None:
        if meta.delta.finish_reason:
            info.finish_reasons = [str(meta.delta.finish_reason)]
        _usage(info, meta.delta.usage)


def _embed_response(call: Any, obj: Any) -> None:
    call.info.response_id = obj.id
    meta = obj.meta
    _usage(call.info, meta if meta is not None else None)


CHAT = Endpoint(semconv.PROVIDER_COHERE, semconv.OPERATION_CHAT, observe=_observe,
                from_response=_response, from_stream=_stream)
EMBEDDINGS = Endpoint(semconv.PROVIDER_COHERE, semconv.OPERATION_EMBEDDINGS,
                      from_response=_embed_response, streams=False)
_ROUTES = {"/v2/chat": Route(CHAT), "/v2/embed": Route(EMBEDDINGS)}


def route(path: str) -> Route | None:
    """The endpoint a ``POST`` to ``path`` is, if it is one of this protocol's."""
    for suffix, found in _ROUTES.items():
        if path.endswith(suffix):
            return found
    return None


PROTOCOL = WireProtocol("cohere", route, classifier(OUTPUT), semconv.PROVIDER_COHERE, SSE)
