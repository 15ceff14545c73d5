"""The ``anthropic`` SDK (0.x on httpx; 1.x/2.x on httpx2): messages and beta messages —
``create`` (streaming or not), the ``stream()`` helper and ``parse()`` — sync and async.

anthropic ≥ 2 makes its own ``anthropic.messages.create`` span when a tracer provider
exists; it carries none of our attributes, so the budget counts the call once (ours).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import semconv
from ..protocols.openai import server_headers
from . import Endpoint, LLMCall, LLMInstrumentor, Settings, StreamState, Target, int_or_none
from ._stainless import async_post_wrapper, manager_wrapper, method_wrapper, post_wrapper

_instruments = ("anthropic >= 0.30, < 3",)


def _observe(call: StreamState, event: Any) -> bool:
    kind = event.type
    if kind == "content_block_delta":
        if call.content is not None:
            text = getattr(event.delta, "text", None)
            if text:
                call.content.append(text)
        return True
    if kind == "message_delta":
        call.meta_chunk = event
    return False


def _usage(call: LLMCall, usage: Any, *, output_only: bool = False) -> None:
    if usage is None:
        return
    info = call.info
    output = int_or_none(getattr(usage, "output_tokens", None))
    if output is not None:
        info.output_tokens = output
    if output_only and getattr(usage, "input_tokens", None) is None:
        return
    plain = int_or_none(getattr(usage, "input_tokens", None))
    read = int_or_none(getattr(usage, "cache_read_input_tokens", None))
    created = int_or_none(getattr(usage, "cache_creation_input_tokens", None))
    if plain is None and read is None and created is None:
        return
    # The GenAI conventions count every input token, cached or not, as input.
    info.input_tokens = (plain or 0) + (read or 0) + (created or 0)
    if read is not None:
        info.cache_read = read
    if created is not None:
        info.cache_creation = created


def _response(call: LLMCall, obj: Any) -> None:
    info = call.info
    info.response_model = getattr(obj, "model", None)
    info.response_id = getattr(obj, "id", None)
    reason = getattr(obj, "stop_reason", None)
    if reason:
        info.finish_reasons = [str(reason)]
    _usage(call, getattr(obj, "usage", None))
    if call.capture:
        texts = [getattr(block, "text", "") for block in getattr(obj, "content", None) or ()
                 if getattr(block, "type", None) == "text"]
        info.output_text = "".join(texts)


def _stream(call: LLMCall) -> None:
    start = call.first_chunk
    message = getattr(start, "message", None) if start is not None else None
    if message is not None:
        call.info.response_model = getattr(message, "model", None)
        call.info.response_id = getattr(message, "id", None)
        _usage(call, getattr(message, "usage", None))
    meta = call.meta_chunk
    if meta is not None:
        reason = getattr(getattr(meta, "delta", None), "stop_reason", None)
        if reason:
            call.info.finish_reasons = [str(reason)]
        _usage(call, getattr(meta, "usage", None), output_only=True)


def _messages_in(kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = kwargs.get("system")
    if system:
        out.append({"role": "system", "parts": [{"type": "text", "content": system}]})
    for message in kwargs.get("messages") or ():
        if isinstance(message, dict):
            out.append({"role": message.get("role"),
                        "parts": [{"type": "text", "content": message.get("content")}]})
    return out


MESSAGES = Endpoint(semconv.PROVIDER_ANTHROPIC, semconv.OPERATION_CHAT, observe=_observe,
                    from_response=_response, from_stream=_stream, input_messages=_messages_in,
                    server_timing=server_headers)


#: The low-level layer's paths: ``client.post("/v1/messages", …)``.
PATHS = {"/v1/messages": MESSAGES}


def _targets(settings: Settings) -> list[Target]:
    create = method_wrapper(MESSAGES, settings)
    stream = manager_wrapper(MESSAGES, settings)
    targets: list[Target] = []
    for module in ("anthropic.resources.messages", "anthropic.resources.beta.messages"):
        for cls in ("Messages", "AsyncMessages"):
            targets += [(module, f"{cls}.create", create), (module, f"{cls}.parse", create),
                        (module, f"{cls}.stream", stream)]
    low_level = post_wrapper(PATHS, settings)
    async_low_level = async_post_wrapper(PATHS, settings)
    targets += [("anthropic._base_client", "SyncAPIClient.post", low_level),
                ("anthropic._base_client", "AsyncAPIClient.post", async_low_level)]
    return targets


class AnthropicInstrumentor(LLMInstrumentor):
    """Spans ``chat {model}`` for Claude messages with first-token time and phases."""

    _instruments = _instruments

    def targets(self, settings: Settings) -> list[Target]:
        return _targets(settings)
