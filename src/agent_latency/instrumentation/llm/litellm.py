"""litellm: ``completion``/``acompletion``, ``responses``/``aresponses`` and
``embedding``/``aembedding`` (module-level functions, streaming or not), whatever provider
litellm routes the request to.

One call span per model request, named after the provider litellm picked (``openai``,
``anthropic``, ``gcp.gemini``, ``hosted_vllm`` …).  litellm's OpenAI path goes through the
openai SDK's low-level ``client.post``; its other providers call httpx directly, and its
async client runs httpx on an aiohttp transport: the call is current while litellm sends, so
the send patch sees every attempt, and the SDK layers under it are not counted again.
Streams are litellm's own ``CustomStreamWrapper``, whose chunks have the OpenAI chat shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ... import semconv
from . import Endpoint, LLMInstrumentor, Settings, StreamState, Target
from ._invoke import Hooks, call_wrapper
from .openai import EMBEDDINGS, RESPONSES, chat_response, chat_stream, messages_in

_instruments = ("litellm >= 1.40",)

# litellm's provider names that the GenAI conventions name differently.
_PROVIDER_NAMES = {
    "gemini": semconv.PROVIDER_GCP_GEMINI, "vertex_ai": semconv.PROVIDER_GCP_VERTEX_AI,
    "vertex_ai_beta": semconv.PROVIDER_GCP_VERTEX_AI,
    "bedrock": "aws.bedrock", "azure": "azure.ai.openai", "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai", "xai": "x_ai", "cohere_chat": "cohere", "watsonx": "ibm.watsonx.ai",
}


def _observe(state: StreamState, chunk: Any) -> bool:
    choices = chunk.choices
    if choices:
        choice = choices[0]
        delta = choice.delta
        if delta is not None:
            content = delta.content
            if (content or delta.tool_calls or getattr(delta, "reasoning_content", None)
                    or getattr(delta, "function_call", None)):
                if state.content is not None and content:
                    state.content.append(content)
                return True
        if choice.finish_reason is not None:
            # litellm puts usage (with ``stream_options``) on the finishing chunk.
            state.meta_chunk = state.usage_chunk = chunk
        return False
    state.usage_chunk = chunk
    return False


CHAT = Endpoint(semconv.PROVIDER_OPENAI, semconv.OPERATION_CHAT, observe=_observe,
                from_response=chat_response, from_stream=chat_stream,
                input_messages=messages_in)


# -- the request --------------------------------------------------------------------------
def _request(positional: tuple[str, ...]) -> Any:
    def request_of(instance: Any, args: tuple[Any, ...],
                   kwargs: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool | None]:
        if not args:
            return kwargs, None
        request = dict(zip(positional, args, strict=False))  # fewer args than names
        request.update(kwargs)
        return request, None

    return request_of


class _Route:
    """Where litellm sends one request: provider, model without its prefix, api base."""

    __slots__ = ("api_base", "model", "provider")

    def __init__(self, request: Mapping[str, Any]) -> None:
        model = request.get("model")
        self.model = model if isinstance(model, str) else ""
        self.provider: str | None = None
        base = request.get("api_base") or request.get("base_url")
        self.api_base = base if isinstance(base, str) else None
        try:
            # The library: imported once the program did, never by us first.
            from litellm import get_llm_provider

            model_name, provider, _key, api_base = get_llm_provider(
                model=self.model, custom_llm_provider=request.get("custom_llm_provider"),
                api_base=self.api_base)
            self.model = model_name or self.model
            self.provider = _PROVIDER_NAMES.get(provider, provider) if provider else None
            self.api_base = api_base or self.api_base
        except Exception:  # noqa: BLE001, S110 - litellm will raise its own error for the program
            pass


def _route_of(request: Mapping[str, Any]) -> _Route:
    # One lookup per call, shared by the three hooks below (they run in this order).
    route = request.get("_agent_latency_route")
    return route if isinstance(route, _Route) else _Route(request)


def _with_route(request_of: Any) -> Any:
    def hook(instance: Any, args: tuple[Any, ...],
             kwargs: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool | None]:
        request, streaming = request_of(instance, args, kwargs)
        route = _Route(request)
        # The call reads ``model`` for its span name; litellm's own kwargs are not changed.
        view = dict(request)
        view["model"] = route.model
        view["_agent_latency_route"] = route
        return view, streaming

    return hook


def _provider_of(request: Mapping[str, Any]) -> str | None:
    return _route_of(request).provider


def _server_of(instance: Any, request: Mapping[str, Any]) -> tuple[str | None, int | None]:
    base = _route_of(request).api_base
    if not base:
        return None, None
    try:
        url = urlsplit(base)
        port = url.port or (443 if url.scheme == "https" else 80)
        return url.hostname, port
    except ValueError:
        return None, None


def _hooks(positional: tuple[str, ...]) -> Hooks:
    return Hooks(request_of=_with_route(_request(positional)), server_of=_server_of,
                 provider_of=_provider_of)


def _targets(settings: Settings) -> list[Target]:
    chat = call_wrapper(CHAT, settings, _hooks(("model", "messages")))
    responses = call_wrapper(RESPONSES, settings, _hooks(("input", "model")))
    embeddings = call_wrapper(EMBEDDINGS, settings, _hooks(("model", "input")))
    targets: list[Target] = []
    # ``litellm.completion`` is a wrapper of ``litellm.main.completion``, which litellm's own
    # async path and router call: both are wrapped; the inner one passes through.
    for module in ("litellm", "litellm.main"):
        targets += [(module, "completion", chat), (module, "acompletion", chat),
                    (module, "embedding", embeddings), (module, "aembedding", embeddings)]
    targets += [("litellm", "responses", responses), ("litellm", "aresponses", responses)]
    return targets


class LiteLLMInstrumentor(LLMInstrumentor):
    """Spans ``chat {model}`` for every model request made through litellm."""

    _instruments = _instruments

    def targets(self, settings: Settings) -> list[Target]:
        return [t for t in _targets(settings) if _is_function(*t[:2])]


def _is_function(module_name: str, attribute: str) -> bool:
    # ``litellm.responses`` is also a subpackage: wrap it only while it is the function.
    import importlib
    import types

    try:
        value = getattr(importlib.import_module(module_name), attribute, None)
    except ImportError:
        return False
    return callable(value) and not isinstance(value, types.ModuleType)


