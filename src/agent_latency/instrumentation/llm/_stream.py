"""Proxies over what an SDK hands back before the response is finished.

Per streamed chunk the proxy takes one timestamp, bumps a counter and asks the endpoint's
``observe`` whether the chunk carries output (attribute access only); no OpenTelemetry call
and no other allocation.  A stream ends its call exactly once, however it ends: exhausted,
``close()``, context-manager exit, an exception (error status), async cancellation, the SDK
helper closing the HTTP response (seen through httpcore's ``response_closed`` event), or the
proxy being garbage-collected after a ``break`` (then it ends at the last chunk taken).
"""

from __future__ import annotations

import inspect
import weakref
from time import perf_counter
from typing import Any

from wrapt import ObjectProxy

from ..._log import internal_error
from ._call import LLMCall, abandon_call


def _guard(obj: Any, call: LLMCall) -> Any:
    """End ``call`` when ``obj`` is garbage-collected (a stream dropped after ``break``)."""
    try:
        return weakref.finalize(obj, abandon_call, call)
    except TypeError:  # not weak-referenceable: the response_closed event still ends it
        return None


def _sdk_next(wrapped: Any, name: str) -> Any:
    """The fastest way to the next chunk: the SDK stream's own generator when ``wrapped`` is
    an SDK ``Stream`` whose ``__next__`` only forwards to it (``return
    self._iterator.__next__()``, checked on its code); otherwise (anthropic's observer,
    another instrumentation's proxy, a subclass) its public method."""
    method = getattr(type(wrapped), name, None)
    code = getattr(method, "__code__", None)
    if code is not None and tuple(code.co_names) == ("_iterator", name):
        iterator = getattr(wrapped, "_iterator", None)
        bound = getattr(iterator, name, None)
        if bound is not None:
            return bound
    return getattr(wrapped, name)


_CHUNK_SLOTS = ("__weakref__", "call", "chunks", "content", "first_chunk",
                "in_next", "meta_chunk", "next", "observe", "outputs", "t_chunk", "t_first",
                "t_first_chunk", "t_last", "usage_chunk")


class _Chunks:
    """Per-chunk state of one stream, in one slots object (one object touched per chunk).

    The endpoint's ``observe(state, chunk)`` sees this object: ``content`` (a list when
    capture is on), ``meta_chunk`` and ``usage_chunk`` are for it to fill.  The call copies
    the marks when it ends (:meth:`LLMCall.finish`) and holds only a weak reference, so a
    stream dropped after ``break`` is freed at once and ``__del__`` ends its call.
    """

    __slots__ = _CHUNK_SLOTS

    def __init__(self, call: LLMCall, next_chunk: Any) -> None:
        self.call = call
        self.next = next_chunk
        self.observe = call.endpoint.observe
        self.in_next = False
        self.chunks = self.outputs = 0
        self.t_chunk = self.t_first = self.t_last = self.t_first_chunk = None
        self.first_chunk = self.meta_chunk = self.usage_chunk = None
        self.content = call.content
        call.stream = weakref.ref(self)

    def __del__(self) -> None:
        try:
            self.call.abandon(self)
        except Exception:  # noqa: BLE001
            internal_error("llm.abandon")


class _SyncChunks(_Chunks):
    """The sync per-chunk hot path."""

    __slots__ = ()

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        self.in_next = True
        try:
            chunk = self.next()
        except StopIteration:
            self.in_next = False
            self.call.finish(None, None, None, self)
            raise
        except BaseException as exc:
            self.in_next = False
            self.call.finish(None, exc, None, self)
            raise
        self.in_next = False
        self.t_chunk = t = perf_counter()
        n = self.chunks
        self.chunks = n + 1
        if not n:
            self.t_first_chunk = t
            self.first_chunk = chunk
        try:
            if self.observe(self, chunk):
                if self.t_first is None:
                    self.t_first = t
                self.t_last = t
                self.outputs += 1
        except Exception:  # noqa: BLE001 - an odd chunk must not reach the program
            internal_error("llm.observe")
        return chunk


class _AsyncChunks(_Chunks):
    """The async per-chunk hot path.

    It repeats the sync body on purpose: a helper shared by both would add a Python call to
    every chunk, about a fifth of what the proxy costs per chunk."""

    __slots__ = ()

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        self.in_next = True
        try:
            chunk = await self.next()
        except StopAsyncIteration:
            self.in_next = False
            self.call.finish(None, None, None, self)
            raise
        except BaseException as exc:  # CancelledError included: the call ends as an error
            self.in_next = False
            self.call.finish(None, exc, None, self)
            raise
        self.in_next = False
        self.t_chunk = t = perf_counter()
        n = self.chunks
        self.chunks = n + 1
        if not n:
            self.t_first_chunk = t
            self.first_chunk = chunk
        try:
            if self.observe(self, chunk):
                if self.t_first is None:
                    self.t_first = t
                self.t_last = t
                self.outputs += 1
        except Exception:  # noqa: BLE001
            internal_error("llm.observe")
        return chunk


class SyncStream(ObjectProxy):  # type: ignore[misc]
    """A sync SDK stream (``openai.Stream``, ``anthropic.Stream``) with first-token timing.

    ``iter()`` hands out the slots iterator, so a ``for`` loop never touches the proxy per
    chunk; everything else (``response``, ``isinstance``) is the SDK stream's.
    """

    def __init__(self, wrapped: Any, call: LLMCall) -> None:
        super().__init__(wrapped)
        self._self_call = call
        # The iterator outlives the proxy in ``for chunk in client...create(stream=True)``;
        # its __del__ ends a call nobody finished.
        self._self_chunks = _SyncChunks(call, _sdk_next(wrapped, "__next__"))
        call.defer()

    def __iter__(self) -> Any:
        return self._self_chunks

    def __next__(self) -> Any:
        return self._self_chunks.__next__()

    def close(self) -> Any:
        try:
            return self.__wrapped__.close()
        finally:
            self._self_call.finish()

    def __enter__(self) -> Any:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_call.finish()


class AsyncStream(ObjectProxy):  # type: ignore[misc]
    """An async SDK stream with first-token timing; cancellation ends the call with an error."""

    def __init__(self, wrapped: Any, call: LLMCall) -> None:
        super().__init__(wrapped)
        self._self_call = call
        self._self_chunks = _AsyncChunks(call, _sdk_next(wrapped, "__anext__"))
        call.defer()

    def __aiter__(self) -> Any:
        return self._self_chunks

    def __anext__(self) -> Any:
        return self._self_chunks.__anext__()

    async def close(self) -> Any:
        try:
            return await self.__wrapped__.close()
        finally:
            self._self_call.finish()

    async def aclose(self) -> Any:
        try:
            closer = getattr(self.__wrapped__, "aclose", None) or self.__wrapped__.close
            return await closer()
        finally:
            self._self_call.finish()

    async def __aenter__(self) -> Any:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_call.finish()


def is_sync_stream(obj: Any) -> bool:
    # Type-level checks first: a missing attribute on a pydantic model is slow to look up.
    return hasattr(type(obj), "__next__") and hasattr(obj, "response")


def is_async_stream(obj: Any) -> bool:
    return hasattr(type(obj), "__anext__") and hasattr(obj, "response")


def wrap_stream(obj: Any, call: LLMCall) -> Any:
    """Our proxy around an SDK stream, or ``obj`` itself when it is not one.

    Sync or async follows the call (other instrumentations' stream proxies may define both
    ``__next__`` and ``__anext__``).
    """
    if call.is_async:
        return AsyncStream(obj, call) if is_async_stream(obj) else obj
    return SyncStream(obj, call) if is_sync_stream(obj) else obj


class RawResponse(ObjectProxy):  # type: ignore[misc]
    """``with_raw_response`` / ``with_streaming_response`` results: ``parse()`` is watched.

    A streaming body parses into an SDK stream, which gets our stream proxy; an unread
    non-streaming body ends the call when ``parse()`` has read it; ``close()`` ends it too
    (through the ``response_closed`` event of the HTTP stack, or here).
    """

    def __init__(self, wrapped: Any, call: LLMCall) -> None:
        super().__init__(wrapped)
        self._self_call = call
        self._self_parsed: dict[int, Any] = {}
        call.defer()
        self._self_finalizer = _guard(self, call)

    def _self_handle(self, result: Any) -> Any:
        try:
            seen = self._self_parsed.get(id(result))
            if seen is not None:
                return seen
            wrapped = wrap_stream(result, self._self_call)
            if wrapped is result:
                self._self_call.finish(None, None, result)
            else:
                self._self_parsed[id(result)] = wrapped
            return wrapped
        except Exception:  # noqa: BLE001
            internal_error("llm.raw_response")
            return result

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        call = self._self_call
        call.in_next = True  # reading the body closes the response: we end the call here
        try:
            result = self.__wrapped__.parse(*args, **kwargs)
        except BaseException as exc:
            call.in_next = False
            call.finish(None, exc)
            raise
        call.in_next = False
        if inspect.isawaitable(result):
            return self._self_aparse(result)
        return self._self_handle(result)

    async def _self_aparse(self, awaitable: Any) -> Any:
        call = self._self_call
        call.in_next = True
        try:
            result = await awaitable
        except BaseException as exc:
            call.in_next = False
            call.finish(None, exc)
            raise
        call.in_next = False
        return self._self_handle(result)

    def close(self) -> Any:
        try:
            result = self.__wrapped__.close()
        except BaseException:
            self._self_call.finish()
            raise
        if inspect.isawaitable(result):
            return self._self_aclose(result)
        self._self_call.finish()
        return result

    async def _self_aclose(self, awaitable: Any) -> Any:
        try:
            return await awaitable
        finally:
            self._self_call.finish()
