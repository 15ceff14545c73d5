"""Wrappers around whatever makes one model request: start a call, send inside it, hand back a
proxy or finish.

Provider-neutral: a wrapped callable may be a method or a module-level function, sync or
async (decided by ``inspect.isawaitable`` on the result: SDKs wrap async methods in
decorators), and may return a response, an SDK stream, a plain generator or iterator.  What
the core cannot know is asked of the provider module through three small callables
(:class:`Hooks`): which request a call makes, where its server is, and how to treat an
SDK-specific result (the Stainless adapter's raw responses).

The call span is current only while the wrapped callable runs (so the HTTP attempts, other
instrumentations' spans and the ``traceparent`` we inject see it); it is detached before a
stream goes back to the program, so nothing is leaked into the program's context.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context

from ... import _hooks
from ..._log import FAULTS, fault, internal_error
from ..._pauses import PAUSES
from ..net import CURRENT
from ..protocols import Endpoint
from ._call import LLMCall, Settings
from ._stream import STREAM, TRAITS, traits_of, wrap_stream

#: ``request_of(instance, args, kwargs) -> (request, streaming)``: the request's parameters
#: (model, messages, ``stream`` …) and whether it streams (None: from ``request["stream"]``).
RequestOf = Callable[[Any, tuple[Any, ...], Mapping[str, Any]],
                     tuple[Mapping[str, Any], bool | None]]
#: ``server_of(instance, request) -> (host, port)``.
ServerOf = Callable[[Any, Mapping[str, Any]], tuple[str | None, int | None]]
#: ``provider_of(request) -> gen_ai.provider.name`` for libraries that front many providers.
ProviderOf = Callable[[Mapping[str, Any]], str | None]
#: ``adapt(call, result, request) -> result or None``: an SDK-specific result the adapter
#: took over (a proxy it returns), or None to let the core decide.
Adapt = Callable[[LLMCall, Any, Mapping[str, Any]], Any]

def _kwargs_request(instance: Any, args: tuple[Any, ...],
                    kwargs: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool | None]:
    return kwargs, None


def _no_server(instance: Any, request: Mapping[str, Any]) -> tuple[str | None, int | None]:
    return None, None


class Hooks:
    """How one wrapped callable's calls are read: the parts the core cannot know."""

    __slots__ = ("adapt", "provider_of", "request_of", "server_of")

    def __init__(self, *, request_of: RequestOf | None = None,
                 server_of: ServerOf | None = None, provider_of: ProviderOf | None = None,
                 adapt: Adapt | None = None) -> None:
        self.request_of = request_of or _kwargs_request
        self.server_of = server_of or _no_server
        self.provider_of = provider_of
        self.adapt = adapt


PLAIN = Hooks()


def start_call(endpoint: Endpoint, settings: Settings, request: Mapping[str, Any], *,
               streaming: bool | None = None, server: tuple[str | None, int | None] = (None, None),
               provider: str | None = None) -> LLMCall | None:
    """A new call for a request with these parameters; None when we cannot."""
    try:
        if _hooks._later:
            _hooks.run_later()  # a safe point: streams collected unfinished end now
        if not PAUSES.installed:
            PAUSES.install()  # so that a collection's finalizers are known as such
        if FAULTS:
            fault("llm.start")
        model = request.get("model")
        model = model if isinstance(model, str) else ""
        if streaming is None:
            streaming = request.get("stream") is True
        return LLMCall(endpoint, settings, model, request, streaming=streaming, server=server,
                       provider=provider)
    except Exception:  # noqa: BLE001
        internal_error("llm.start")
        return None


def handle_result(call: LLMCall, result: Any, request: Mapping[str, Any],
                  adapt: Adapt | None = None) -> Any:
    """What the wrapped callable returned: proxy a stream, let the adapter take an
    SDK-specific object, or finish the call now."""
    try:
        if FAULTS:
            fault("llm.result")
        cls = type(result)
        traits = TRAITS.get(cls)
        if traits is None:
            traits = traits_of(cls)
        if traits & STREAM:
            wrapped = wrap_stream(result, call)
            if wrapped is not result:
                return wrapped
        if adapt is not None:
            adapted = adapt(call, result, request)
            if adapted is not None:
                return adapted
        call.finish(None, None, result)
    except Exception:  # noqa: BLE001
        internal_error("llm.result")
        call.finish()
    return result


class Inside:
    """``call`` is current inside ``with`` (for its HTTP attempts, other instrumentations'
    spans and the ``traceparent`` we inject); an exception out of the block ends it."""

    __slots__ = ("_ctx_token", "_token", "call")

    def __init__(self, call: LLMCall) -> None:
        self.call = call

    def __enter__(self) -> None:
        self._token = CURRENT.set(self.call)
        self._ctx_token = otel_context.attach(self.call.context)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is not None:
            self.call.finish(None, exc)
        otel_context.detach(self._ctx_token)
        CURRENT.reset(self._token)


async def _await_result(call: LLMCall, awaitable: Any, request: Mapping[str, Any],
                        adapt: Adapt | None) -> Any:
    call.is_async = True
    with Inside(call):
        result = await awaitable
    return handle_result(call, result, request, adapt)


def invoke(endpoint: Endpoint, settings: Settings, hooks: Hooks, wrapped: Any, instance: Any,
           args: Any, kwargs: Any) -> Any:
    """Run ``wrapped(*args, **kwargs)`` as one model request of ``endpoint``."""
    if CURRENT.get() is not None:
        return wrapped(*args, **kwargs)  # a layer under a call of ours: counted once
    call = None
    try:
        if FAULTS:
            fault("llm.request")
        request, streaming = hooks.request_of(instance, args, kwargs)
        provider = hooks.provider_of(request) if hooks.provider_of is not None else None
        call = start_call(endpoint, settings, request, streaming=streaming,
                          server=hooks.server_of(instance, request), provider=provider)
    except Exception:  # noqa: BLE001
        internal_error("llm.request")
    if call is None:
        return wrapped(*args, **kwargs)
    with Inside(call):
        result = wrapped(*args, **kwargs)
    if inspect.isawaitable(result):
        return _await_result(call, result, request, hooks.adapt)
    return handle_result(call, result, request, hooks.adapt)


def call_wrapper(endpoint: Endpoint, settings: Settings, hooks: Hooks = PLAIN) -> Any:
    """A wrapt wrapper for a method or function that makes one model request."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return invoke(endpoint, settings, hooks, wrapped, instance, args, kwargs)

    return wrapper
