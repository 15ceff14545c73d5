"""The OpenAI-compatible protocol: chat completions, (legacy) completions, embeddings and
the Responses API, as OpenAI, Groq, Mistral, DeepSeek, xAI, vLLM, TGI, Hugging Face's router
and most local servers speak it.

- Endpoints: a ``POST`` to a path ending ``/chat/completions``, ``/completions``,
  ``/embeddings`` or ``/responses``; the JSON body names ``model``, ``stream``, the messages
  or input and the generation parameters.
- Framing: server-sent events, ``data: {…}`` lines, chat's ending ``data: [DONE]``.
- Output: a chat ``delta`` with non-empty ``content``, ``refusal``, ``reasoning_content`` or
  ``reasoning``, or ``tool_calls`` / ``function_call``; a Responses output delta event, or an
  added function/custom-tool/MCP call item.
- Usage: ``usage.prompt_tokens`` / ``completion_tokens`` (chat), ``input_tokens`` /
  ``output_tokens`` (Responses); server timings: Groq's ``usage.{queue,prompt,completion}_time``
  and Cerebras' ``time_info`` (seconds), vLLM's ``metrics`` (ms), TGI's ``x-queue-time``
  header and OpenAI's ``openai-processing-ms`` header (ms).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ... import semconv
from ..._headers import header_values
from ._endpoint import Endpoint, int_or_none, seconds
from ._events import OutputRule, classifier
from ._framing import SSE
from ._protocol import Route, WireProtocol

#: The Responses API's events that carry output.
RESPONSES_OUTPUT = frozenset({
    "response.output_text.delta", "response.function_call_arguments.delta",
    "response.reasoning_text.delta", "response.reasoning_summary_text.delta",
    "response.refusal.delta", "response.custom_tool_call_input.delta",
    "response.audio.delta", "response.audio.transcript.delta",
    "response.code_interpreter_call_code.delta", "response.mcp_call_arguments.delta",
})
#: Output items that are output the moment they are added: a call's name is the first
#: thing generated, before any argument delta.
RESPONSES_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "mcp_call"})

OUTPUT = OutputRule(
    text_fields=("content", "refusal", "reasoning_content", "reasoning"),
    call_fields=("tool_calls", "function_call"),
    output_types=RESPONSES_OUTPUT,
    # The Responses API's item/part announcements and final events repeat the text so far.
    not_output_types=frozenset({
        "response.created", "response.in_progress", "response.completed",
        "response.incomplete", "response.failed", "response.output_item.added",
        "response.output_item.done", "response.content_part.added",
        "response.content_part.done", "response.output_text.done",
        "response.function_call_arguments.done", "response.reasoning_text.done",
        "response.refusal.done"}),
    call_items=RESPONSES_CALL_ITEMS,
)


# -- server timings ------------------------------------------------------------------------
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


def _is_mapping(value: Any) -> bool:
    # A JSON object is a dict: checked first, since ``isinstance`` against the abstract
    # ``Mapping`` is a Python call (``ABCMeta.__instancecheck__``) on every check.
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


def _as_mapping(value: Any) -> Mapping[str, Any]:
    return value if _is_mapping(value) else _NO_EXTRA


def server_body_timing(info: Any, obj: Any, usage: Any) -> None:
    """vLLM ``metrics``, Groq ``usage.*_time``, Cerebras ``time_info`` (non-streaming, or a
    stream's usage chunk)."""
    # pydantic's ``model_extra`` is a dict (or None): the common case without a call.
    extra: Any = getattr(obj, "model_extra", None)
    if type(extra) is not dict:
        extra = _as_mapping(extra)
    usage_extra: Any = getattr(usage, "model_extra", None)
    if type(usage_extra) is not dict:
        usage_extra = _as_mapping(usage_extra)
    if extra:
        metrics = extra.get("metrics")
        if _is_mapping(metrics) and "generation_time_ms" in metrics:
            info.server_generation = seconds(metrics.get("generation_time_ms"), 1e-3)
            info.server_prefill = seconds(metrics.get("time_to_first_token_ms"), 1e-3)
            info.server_queue = seconds(metrics.get("queue_time_ms"), 1e-3)
            return
        sources: tuple[Any, ...] = (usage_extra, extra.get("time_info"), extra.get("x_groq"))
    elif usage_extra:
        sources = (usage_extra,)
    else:
        return
    for source in sources:
        if not source:
            continue
        if _is_mapping(source) and _is_mapping(source.get("usage")):
            source = source["usage"]  # Groq puts a stream's usage under ``x_groq``
        if _is_mapping(source) and "completion_time" in source:
            info.server_generation = seconds(source.get("completion_time"))
            info.server_prefill = seconds(source.get("prompt_time"))
            info.server_queue = seconds(source.get("queue_time"))
            info.server_total = seconds(source.get("total_time"))
            return


def _ms(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return seconds(float(value), 1e-3)
    except ValueError:
        return None


_SERVER_HEADERS = (b"x-queue-time", b"openai-processing-ms")


def server_headers(call: Any, headers: Mapping[str, str]) -> None:
    """TGI ``x-queue-time`` (the server's queueing, reported beside prefill) and OpenAI's
    ``openai-processing-ms`` (the server's whole time), in milliseconds."""
    info = call.info
    queue, total = header_values(headers, _SERVER_HEADERS)
    if info.server_queue is None and queue:
        info.server_queue = _ms(queue)
    if info.server_total is None and total:
        info.server_total = _ms(total)


# -- the legacy completions endpoint (the SDKs no longer call it: read on the wire only) --------
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


def _completions_usage(info: Any, usage: Any) -> None:
    if usage is not None:
        info.input_tokens = int_or_none(getattr(usage, "prompt_tokens", None))
        info.output_tokens = int_or_none(getattr(usage, "completion_tokens", None))


def _completions_response(call: Any, obj: Any) -> None:
    info = call.info
    info.response_model = getattr(obj, "model", None)
    info.response_id = getattr(obj, "id", None)
    info.finish_reasons = [c.finish_reason for c in getattr(obj, "choices", None) or ()
                           if c.finish_reason]
    _completions_usage(info, getattr(obj, "usage", None))


def _completions_stream(call: Any) -> None:
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
                       from_stream=_completions_stream, server_timing=server_headers)


# -- which requests are its ------------------------------------------------------------------
_SDK = "agent_latency.instrumentation.llm.openai"
_SUFFIXES: tuple[tuple[str, Route], ...] = (
    ("/chat/completions", Route(f"{_SDK}:CHAT")),
    ("/completions", Route(COMPLETIONS)),
    ("/embeddings", Route(f"{_SDK}:EMBEDDINGS")),
    ("/responses", Route(f"{_SDK}:RESPONSES")),
)


def route(path: str) -> Route | None:
    """The endpoint a ``POST`` to ``path`` is, if it is one of this protocol's."""
    for suffix, found in _SUFFIXES:
        if path.endswith(suffix):
            return found
    return None


PROTOCOL = WireProtocol("openai", route, classifier(OUTPUT), semconv.PROVIDER_OPENAI, SSE)
