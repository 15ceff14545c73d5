"""The ``google-genai`` SDK (Gemini API and Vertex AI): ``generate_content`` and
``generate_content_stream`` of ``client.models`` and ``client.aio.models``, sync and async,
streaming or not (chats go through them too).

One span per model request: the SDK's per-request methods ``Models._generate_content`` and
``_generate_content_stream`` (and their ``AsyncModels`` twins) are wrapped, not the public
ones, because a public call may make several requests — automatic function calling runs the
program's Python tools between them, automatic continuation follows continuation tokens —
and one span over all of them would count the tools and the earlier requests as retries.
A release without the per-request methods gets its public methods wrapped instead.

On the wire: ``POST {base}/{version}/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse``.  Sync calls go through the SDK's httpx2 client (httpx when
httpx2 is missing or the program passes an httpx client), so every attempt is timed and
carries ``traceparent``.  Async calls use aiohttp when it is installed (the SDK's default)
and then no HTTP attempt is seen: no network phases, no ``traceparent``, the time before the
first token is all prefill; with ``HttpOptions(httpx_async_client=…)`` (or aiohttp absent)
they go through httpx/httpx2 and are timed like the sync ones.

A stream chunk is a ``GenerateContentResponse``; it carries output when a part of a
candidate has text (answer or thought) or a function call, inline data or code.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from ... import semconv
from . import Endpoint, Info, LLMCall, LLMInstrumentor, Settings, StreamState, Target, int_or_none
from ._invoke import Hooks, call_wrapper

_instruments = ("google-genai >= 1.0",)

#: The GenAI conventions' name for Gemini on Vertex AI (``Client(vertexai=True)``).


# -- stream chunks ----------------------------------------------------------------------------
def _observe(state: StreamState, chunk: Any) -> bool:
    # Per chunk: attribute access only.  Gemini puts usage on every chunk (the last one has
    # the output count) and the finish reason on the last.
    if chunk.usage_metadata is not None:
        state.usage_chunk = chunk
    candidates = chunk.candidates
    if not candidates:
        return False
    output = False
    capture = state.content
    for candidate in candidates:
        if candidate.finish_reason is not None:
            state.meta_chunk = chunk
        content = candidate.content
        if content is not None:
            for part in content.parts or ():
                text = part.text
                if text:
                    output = True
                    if capture is not None and not part.thought:
                        capture.append(text)
                elif (part.function_call is not None or part.inline_data is not None
                      or part.executable_code is not None):
                    output = True
        capture = None  # only the first candidate's text is captured
    return output


# -- responses ------------------------------------------------------------------------------------
def _usage(info: Info, usage: Any) -> None:
    if usage is None:
        return
    prompt = int_or_none(getattr(usage, "prompt_token_count", None))
    tool_prompt = int_or_none(getattr(usage, "tool_use_prompt_token_count", None))
    if prompt is not None or tool_prompt is not None:
        # prompt_token_count already includes cached tokens; tool-use prompts are input too.
        info.input_tokens = (prompt or 0) + (tool_prompt or 0)
    answer = int_or_none(getattr(usage, "candidates_token_count", None))
    thoughts = int_or_none(getattr(usage, "thoughts_token_count", None))
    if answer is not None or thoughts is not None:
        info.output_tokens = (answer or 0) + (thoughts or 0)
    info.reasoning_tokens = thoughts
    info.cache_read = int_or_none(getattr(usage, "cached_content_token_count", None))


def _finish_reasons(obj: Any) -> list[str]:
    reasons = []
    for candidate in getattr(obj, "candidates", None) or ():
        reason = getattr(candidate, "finish_reason", None)
        if reason is not None:
            reasons.append(str(getattr(reason, "value", reason)))
    return reasons


def _response(call: LLMCall, obj: Any) -> None:
    info = call.info
    info.response_model = getattr(obj, "model_version", None)
    info.response_id = getattr(obj, "response_id", None)
    info.finish_reasons = _finish_reasons(obj)
    _usage(info, getattr(obj, "usage_metadata", None))
    if call.capture:
        candidates = getattr(obj, "candidates", None)
        content = getattr(candidates[0], "content", None) if candidates else None
        info.output_text = "".join(
            part.text for part in getattr(content, "parts", None) or ()
            if getattr(part, "text", None) and not getattr(part, "thought", None))


def _stream(call: LLMCall) -> None:
    info = call.info
    for chunk in (call.meta_chunk, call.usage_chunk, call.first_chunk):
        if chunk is not None:
            info.response_model = info.response_model or getattr(chunk, "model_version", None)
            info.response_id = info.response_id or getattr(chunk, "response_id", None)
    if call.meta_chunk is not None:
        info.finish_reasons = _finish_reasons(call.meta_chunk)
    if call.usage_chunk is not None:
        _usage(info, call.usage_chunk.usage_metadata)


# -- request content (capture only) ------------------------------------------------------------
def _field(obj: Any, name: str, camel: str | None = None) -> Any:
    """A field of an SDK model or of the dict the program passed instead (either case)."""
    if isinstance(obj, Mapping):
        value = obj.get(name)
        return obj.get(camel) if value is None and camel else value
    return getattr(obj, name, None)


def _part(part: Any) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "content": part}
    text = _field(part, "text")
    if text is not None:
        return {"type": "text", "content": text}
    call = _field(part, "function_call", "functionCall")
    if call is not None:
        return {"type": "tool_call", "id": _field(call, "id"), "name": _field(call, "name"),
                "arguments": _field(call, "args")}
    response = _field(part, "function_response", "functionResponse")
    if response is not None:
        return {"type": "tool_call_response", "id": _field(response, "id"),
                "response": _field(response, "response")}
    fields = part.keys() if isinstance(part, Mapping) else (
        name for name, value in vars(part).items() if value is not None)
    return {"type": next(iter(fields), "unknown")}


def _is_content(item: Any) -> bool:
    return _field(item, "parts") is not None


def _parts(item: Any) -> list[dict[str, Any]]:
    if _is_content(item):
        return [_part(p) for p in _field(item, "parts")]
    if isinstance(item, list):
        return [p for entry in item for p in _parts(entry)]
    return [_part(item)]


def _message(role: Any, parts: list[dict[str, Any]]) -> dict[str, Any]:
    if role == "model":
        role = "assistant"
    elif parts and all(p["type"] == "tool_call_response" for p in parts):
        role = "tool"
    return {"role": role or "user", "parts": parts}


def _messages_in(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = _field(request.get("config"), "system_instruction", "systemInstruction")
    if system is not None:
        out.append({"role": "system", "parts": _parts(system)})
    contents = request.get("contents")
    if contents is None:
        return out
    loose: list[dict[str, Any]] = []  # strings and parts outside a Content: one user turn
    for item in contents if isinstance(contents, list) else [contents]:
        if _is_content(item):
            if loose:
                out.append(_message("user", loose))
                loose = []
            out.append(_message(_field(item, "role"), _parts(item)))
        else:
            loose += _parts(item)
    if loose:
        out.append(_message("user", loose))
    return out


CHAT = Endpoint(semconv.PROVIDER_GCP_GEMINI, semconv.OPERATION_CHAT, observe=_observe,
                from_response=_response, from_stream=_stream, input_messages=_messages_in)


# -- the request --------------------------------------------------------------------------------
def _model_name(model: Any) -> str:
    """``gemini-2.5-flash`` for ``models/gemini-2.5-flash`` or a Vertex resource path."""
    if not isinstance(model, str):
        return ""
    _, sep, name = model.rpartition("models/")
    return name if sep and name else model


def _request_of(streaming: bool) -> Any:
    def request_of(instance: Any, args: tuple[Any, ...],
                   kwargs: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool | None]:
        config = kwargs.get("config")
        request: dict[str, Any] = {"model": _model_name(kwargs.get("model")),
                                   "stream": streaming, "contents": kwargs.get("contents"),
                                   "config": config}
        if config is not None:
            request["max_tokens"] = _field(config, "max_output_tokens", "maxOutputTokens")
            request["temperature"] = _field(config, "temperature")
        if getattr(getattr(instance, "_api_client", None), "vertexai", False):
            request["_provider"] = semconv.PROVIDER_GCP_VERTEX_AI
        return request, streaming

    return request_of


def _provider_of(request: Mapping[str, Any]) -> str | None:
    return request.get("_provider")


@lru_cache(maxsize=64)
def _host_port(base_url: str) -> tuple[str | None, int | None]:
    try:
        url = urlsplit(base_url)
        return url.hostname, url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return None, None


def _server_of(instance: Any, request: Mapping[str, Any]) -> tuple[str | None, int | None]:
    # A request's own ``config.http_options.base_url``, else the client's.
    options = _field(request.get("config"), "http_options", "httpOptions")
    base = _field(options, "base_url", "baseUrl") if options is not None else None
    if not base:
        client_options = getattr(getattr(instance, "_api_client", None), "_http_options", None)
        base = getattr(client_options, "base_url", None)
    return _host_port(base) if isinstance(base, str) and base else (None, None)


# -- the targets ------------------------------------------------------------------------------
#: (per-request method, public method, streaming)
_METHODS = (("_generate_content", "generate_content", False),
            ("_generate_content_stream", "generate_content_stream", True))


def _targets(settings: Settings) -> list[Target]:
    try:
        # The library: imported once the program did, never by us first.
        from google.genai import models
    except ImportError:
        return []
    targets: list[Target] = []
    for private, public, streaming in _METHODS:
        wrapper = call_wrapper(CHAT, settings, Hooks(
            request_of=_request_of(streaming), server_of=_server_of, provider_of=_provider_of))
        for cls in ("Models", "AsyncModels"):
            method = private if hasattr(getattr(models, cls, None), private) else public
            targets.append(("google.genai.models", f"{cls}.{method}", wrapper))
    return targets


class GoogleGenAIInstrumentor(LLMInstrumentor):
    """Spans ``chat {model}`` for Gemini requests with first-token time and phases."""

    _instruments = _instruments

    def targets(self, settings: Settings) -> list[Target]:
        return _targets(settings)
