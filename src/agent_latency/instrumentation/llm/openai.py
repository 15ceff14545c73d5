"""The ``openai`` SDK (1.x, 2.x on httpx; 3.x on httpx2): chat completions, Responses,
embeddings — sync and async, streaming or not, plain, ``with_raw_response`` and
``with_streaming_response``, and the ``parse()``/``stream()`` helpers.

This module only knows the endpoints and their chunk shapes; timing, phases, spans and
metrics are the shared core's (``instrumentation.llm``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import semconv
from ..protocols.openai import (
    RESPONSES_CALL_ITEMS,
    RESPONSES_OUTPUT,
    server_body_timing,
    server_headers,
)
from . import (
    Endpoint,
    Info,
    LLMCall,
    LLMInstrumentor,
    Settings,
    StreamState,
    Target,
    _websocket,
    int_or_none,
)
from ._stainless import async_post_wrapper, method_wrapper, post_wrapper

_instruments = ("openai >= 1.0, < 4",)


# -- shared readers ------------------------------------------------------------------------
def _extra(obj: Any) -> dict[str, Any]:
    extra = getattr(obj, "model_extra", None)
    return extra if isinstance(extra, dict) else {}


def messages_in(kwargs: Mapping[str, Any], key: str = "messages") -> list[dict[str, Any]]:
    out = []
    for message in kwargs.get(key) or ():
        if isinstance(message, dict):
            out.append({"role": message.get("role"),
                        "parts": [{"type": "text", "content": message.get("content")}]})
    return out


# -- chat completions ------------------------------------------------------------------------
def _chat_observe(call: StreamState, chunk: Any) -> bool:
    choices = chunk.choices
    if choices:
        choice = choices[0]
        delta = choice.delta
        if delta is not None:
            content = delta.content
            if content or delta.tool_calls or delta.refusal:
                if call.content is not None and content:
                    call.content.append(content)
                return True
            extra = delta.model_extra
            if extra and (extra.get("reasoning_content") or extra.get("reasoning")):
                return True
        if choice.finish_reason is not None:
            call.meta_chunk = chunk
        return False
    call.usage_chunk = chunk
    return False


def _chat_usage(info: Info, usage: Any) -> None:
    if usage is None:
        return
    # (an int checked inline before ``int_or_none``: four Python calls a call less)
    value = getattr(usage, "prompt_tokens", None)
    info.input_tokens = value if type(value) is int else int_or_none(value)
    value = getattr(usage, "completion_tokens", None)
    info.output_tokens = value if type(value) is int else int_or_none(value)
    details = getattr(usage, "prompt_tokens_details", None)
    if details is not None:
        value = getattr(details, "cached_tokens", None)
        info.cache_read = value if type(value) is int else int_or_none(value)
    details = getattr(usage, "completion_tokens_details", None)
    if details is not None:
        value = getattr(details, "reasoning_tokens", None)
        info.reasoning_tokens = value if type(value) is int else int_or_none(value)


def chat_response(call: LLMCall, obj: Any) -> None:
    info = call.info
    info.response_model = getattr(obj, "model", None)
    info.response_id = getattr(obj, "id", None)
    choices = getattr(obj, "choices", None) or ()
    info.finish_reasons = [c.finish_reason for c in choices if c.finish_reason]
    usage = getattr(obj, "usage", None)
    _chat_usage(info, usage)
    server_body_timing(info, obj, usage)
    if call.capture and choices:
        info.output_text = getattr(choices[0].message, "content", None)


def chat_stream(call: LLMCall) -> None:
    info = call.info
    for chunk in (call.usage_chunk, call.meta_chunk, call.first_chunk):
        if chunk is not None:
            info.response_model = info.response_model or getattr(chunk, "model", None)
            info.response_id = info.response_id or getattr(chunk, "id", None)
    meta = call.meta_chunk
    if meta is not None:
        info.finish_reasons = [c.finish_reason for c in meta.choices if c.finish_reason]
    usage = getattr(call.usage_chunk, "usage", None) or getattr(meta, "usage", None)
    _chat_usage(info, usage)
    # (beside the measured phases: Groq's usage timings ride on the last chunk)
    server_body_timing(info, call.usage_chunk or meta, usage)


CHAT = Endpoint(semconv.PROVIDER_OPENAI, semconv.OPERATION_CHAT, observe=_chat_observe,
                from_response=chat_response, from_stream=chat_stream,
                input_messages=messages_in, server_timing=server_headers)


# -- Responses ---------------------------------------------------------------------------------
_RESPONSES_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _responses_observe(call: StreamState, event: Any) -> bool:
    kind = event.type
    if kind in RESPONSES_OUTPUT:
        if call.content is not None and kind == "response.output_text.delta":
            call.content.append(event.delta)
        return True
    if kind == "response.output_item.added":
        return getattr(event.item, "type", None) in RESPONSES_CALL_ITEMS
    if kind in _RESPONSES_FINAL:
        call.meta_chunk = event
    return False


def _responses_response(call: LLMCall, obj: Any) -> None:
    info = call.info
    info.response_model = getattr(obj, "model", None)
    info.response_id = getattr(obj, "id", None)
    incomplete = getattr(obj, "incomplete_details", None)
    reason = getattr(incomplete, "reason", None) if incomplete is not None else None
    status = getattr(obj, "status", None)
    if reason or status:
        info.finish_reasons = [str(reason or status)]
    usage = getattr(obj, "usage", None)
    if usage is not None:
        info.input_tokens = int_or_none(getattr(usage, "input_tokens", None))
        info.output_tokens = int_or_none(getattr(usage, "output_tokens", None))
        details = getattr(usage, "input_tokens_details", None)
        if details is not None:
            info.cache_read = int_or_none(getattr(details, "cached_tokens", None))
        details = getattr(usage, "output_tokens_details", None)
        if details is not None:
            info.reasoning_tokens = int_or_none(getattr(details, "reasoning_tokens", None))
    server_body_timing(info, obj, usage)
    if call.capture:
        try:
            info.output_text = obj.output_text
        except Exception:  # noqa: BLE001, S110 - the text is optional
            pass


def _responses_stream(call: LLMCall) -> None:
    for event in (call.meta_chunk, call.first_chunk):
        response = getattr(event, "response", None)
        if response is not None:
            _responses_response(call, response)
            return


def _responses_in(kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(kwargs.get("instructions"), str):
        out.append({"role": "system",
                    "parts": [{"type": "text", "content": kwargs["instructions"]}]})
    data = kwargs.get("input")
    if isinstance(data, str):
        out.append({"role": "user", "parts": [{"type": "text", "content": data}]})
    elif isinstance(data, list):
        out.extend(messages_in({"messages": data}))
    return out


RESPONSES = Endpoint(semconv.PROVIDER_OPENAI, semconv.OPERATION_CHAT,
                     observe=_responses_observe, from_response=_responses_response,
                     from_stream=_responses_stream, input_messages=_responses_in,
                     server_timing=server_headers)


# -- embeddings (duration and network; the server block counts as prefill) ---------------------
def _embeddings_response(call: LLMCall, obj: Any) -> None:
    info = call.info
    info.response_model = getattr(obj, "model", None)
    usage = getattr(obj, "usage", None)
    if usage is not None:
        info.input_tokens = int_or_none(getattr(usage, "prompt_tokens", None))


EMBEDDINGS = Endpoint(semconv.PROVIDER_OPENAI, semconv.OPERATION_EMBEDDINGS,
                      from_response=_embeddings_response, streams=False)


_CHAT_MODULE = "openai.resources.chat.completions"
_BETA_CHAT_MODULE = "openai.resources.beta.chat.completions"
_RESPONSES_MODULE = "openai.resources.responses"


#: The low-level layer's paths: ``client.post("/chat/completions", …)`` as litellm does.
PATHS = {"/chat/completions": CHAT, "/responses": RESPONSES, "/embeddings": EMBEDDINGS}


def _targets(settings: Settings) -> list[Target]:
    chat, responses = method_wrapper(CHAT, settings), method_wrapper(RESPONSES, settings)
    embeddings = method_wrapper(EMBEDDINGS, settings)
    low_level = post_wrapper(PATHS, settings)
    async_low_level = async_post_wrapper(PATHS, settings)
    return [
        (_CHAT_MODULE, "Completions.create", chat),
        (_CHAT_MODULE, "AsyncCompletions.create", chat),
        (_CHAT_MODULE, "Completions.parse", chat),
        (_CHAT_MODULE, "AsyncCompletions.parse", chat),
        # openai 1.x before parse() left beta: it posts directly.
        (_BETA_CHAT_MODULE, "Completions.parse", chat),
        (_BETA_CHAT_MODULE, "AsyncCompletions.parse", chat),
        (_RESPONSES_MODULE, "Responses.create", responses),
        (_RESPONSES_MODULE, "AsyncResponses.create", responses),
        (_RESPONSES_MODULE, "Responses.parse", responses),
        (_RESPONSES_MODULE, "AsyncResponses.parse", responses),
        ("openai.resources.embeddings", "Embeddings.create", embeddings),
        ("openai.resources.embeddings", "AsyncEmbeddings.create", embeddings),
        ("openai._base_client", "SyncAPIClient.post", low_level),
        ("openai._base_client", "AsyncAPIClient.post", async_low_level),
        # openai 3.x: the Responses API over a persistent WebSocket.
        *_websocket.targets(RESPONSES, settings),
    ]


class OpenAIInstrumentor(LLMInstrumentor):
    """Spans ``chat {model}`` / ``embeddings {model}`` with first-token time and phases."""

    _instruments = _instruments

    def targets(self, settings: Settings) -> list[Target]:
        return _targets(settings)
