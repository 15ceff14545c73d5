"""Wrappers around SDK methods: start a call, send inside it, hand back a proxy or finish.

The call span is current only while the SDK method runs (so the HTTP attempts, other
instrumentations' spans and the ``traceparent`` we inject see it); it is detached before a
stream goes back to the program, so nothing is leaked into the program's context.
"""

from __future__ import annotations

import inspect
from typing import Any

from opentelemetry import context as otel_context
from wrapt import ObjectProxy

from ... import semconv
from ..._env import capture_content, env_flag
from ..._log import internal_error
from ._network import CURRENT
from ._stream import RawResponse, is_async_stream, is_sync_stream, wrap_stream
from ._call import Endpoint, LLMCall

_RAW_HEADER = "X-Stainless-Raw-Response"


def _server_of(instance: Any) -> tuple[str | None, int | None]:
    client = getattr(instance, "_client", None)
    url = getattr(client, "base_url", None)
    if url is None:
        return None, None
    host = getattr(url, "host", None)
    port = getattr(url, "port", None)
    if port is None:
        port = 443 if getattr(url, "scheme", "") == "https" else 80
    return host or None, port


def start_call(endpoint: Endpoint, instance: Any, kwargs: dict[str, Any], *,
               streaming: bool | None = None) -> LLMCall | None:
    """A new call for an SDK method invoked with ``kwargs``; None when we cannot."""
    try:
        model = kwargs.get("model")
        model = model if isinstance(model, str) else ""
        if streaming is None:
            streaming = kwargs.get("stream") is True
        return LLMCall(endpoint, model, kwargs, streaming=streaming,
                       propagate=env_flag(semconv.ENV_PROPAGATE, True),
                       capture=capture_content(), server=_server_of(instance))
    except Exception:  # noqa: BLE001
        internal_error("llm.start")
        return None


def _raw_mode(kwargs: dict[str, Any]) -> str | None:
    headers = kwargs.get("extra_headers")
    if not headers:
        return None
    try:
        value = headers.get(_RAW_HEADER)
    except AttributeError:
        return None
    return str(value) if value is not None else None


def handle_result(call: LLMCall, result: Any, kwargs: dict[str, Any]) -> Any:
    """What the SDK returned: proxy a stream or unread response, or finish now."""
    try:
        cls = type(result)
        if hasattr(cls, "__next__") or hasattr(cls, "__anext__"):
            return wrap_stream(result, call)
        if hasattr(cls, "parse") and hasattr(result, "http_response"):
            if call.streaming or _raw_mode(kwargs) == "stream":
                return RawResponse(result, call)
            parsed = None
            try:
                parsed = result.parse()
                if inspect.isawaitable(parsed):
                    parsed.close()  # type: ignore[union-attr]
                    parsed = None
            except Exception:  # noqa: BLE001 - the program's own parse() will say why
                parsed = None
            call.finish(None, None, parsed)
            return result
        call.finish(None, None, result)
    except Exception:  # noqa: BLE001
        internal_error("llm.result")
        call.finish()
    return result


class _Inside:
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


async def _await_result(call: LLMCall, awaitable: Any, kwargs: dict[str, Any]) -> Any:
    call.is_async = True
    with _Inside(call):
        result = await awaitable
    return handle_result(call, result, kwargs)


def method_wrapper(endpoint: Endpoint) -> Any:
    """A wrapt wrapper for an SDK method that makes one model request (sync or async)."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if CURRENT.get() is not None:
            return wrapped(*args, **kwargs)  # a helper of ours calling another method
        call = start_call(endpoint, instance, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        with _Inside(call):
            result = wrapped(*args, **kwargs)
        if inspect.isawaitable(result):
            return _await_result(call, result, kwargs)
        return handle_result(call, result, kwargs)

    return wrapper


class StreamManager(ObjectProxy):  # type: ignore[misc]
    """A ``stream()`` helper's manager whose request is sent on ``__enter__``.

    The call starts at ``__enter__``; the helper stream's raw SDK stream (``_raw_stream``)
    is swapped for our proxy before it is first iterated.
    """

    def __init__(self, wrapped: Any, endpoint: Endpoint, instance: Any,
                 kwargs: dict[str, Any]) -> None:
        super().__init__(wrapped)
        self._self_endpoint = endpoint
        self._self_instance = instance
        self._self_kwargs = kwargs
        self._self_call: LLMCall | None = None

    def _self_start(self) -> LLMCall | None:
        if CURRENT.get() is not None:
            return None
        call = start_call(self._self_endpoint, self._self_instance, self._self_kwargs,
                          streaming=True)
        self._self_call = call
        return call

    def _self_install(self, stream: Any, call: LLMCall) -> None:
        try:
            raw = getattr(stream, "_raw_stream", None)
            if raw is not None and (is_sync_stream(raw) or is_async_stream(raw)):
                stream._raw_stream = wrap_stream(raw, call)
            else:
                call.defer()
        except Exception:  # noqa: BLE001
            internal_error("llm.stream_manager")
            call.defer()

    def __enter__(self) -> Any:
        call = self._self_start()
        if call is None:
            return self.__wrapped__.__enter__()
        with _Inside(call):
            stream = self.__wrapped__.__enter__()
        self._self_install(stream, call)
        return stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            if self._self_call is not None:
                self._self_call.finish()

    async def __aenter__(self) -> Any:
        call = self._self_start()
        if call is None:
            return await self.__wrapped__.__aenter__()
        call.is_async = True
        with _Inside(call):
            stream = await self.__wrapped__.__aenter__()
        self._self_install(stream, call)
        return stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            if self._self_call is not None:
                self._self_call.finish()


def manager_wrapper(endpoint: Endpoint) -> Any:
    """A wrapt wrapper for a ``stream()`` helper that returns a lazy manager."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        manager = wrapped(*args, **kwargs)
        if CURRENT.get() is not None:
            return manager
        try:
            return StreamManager(manager, endpoint, instance, dict(kwargs))
        except Exception:  # noqa: BLE001
            internal_error("llm.manager")
            return manager

    return wrapper
