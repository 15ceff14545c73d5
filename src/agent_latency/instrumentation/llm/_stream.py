"""Proxies over streams an LLM call hands back before its response is finished: SDK stream
objects, plain sync/async generators and iterators (litellm's stream wrapper, google-genai's
generators).

Per streamed chunk the proxy takes one timestamp, bumps a counter and asks the endpoint's
``observe`` whether the chunk carries output (attribute access only); no OpenTelemetry call
and no other allocation.  Over a generator (an SDK stream's own, or one handed back as it is)
the sync hot path is a generator too (:func:`_sync_chunks`); over any other iterator it is a
class's ``__next__`` (:class:`_SyncChunks`).

A stream ends its call exactly once, however it ends: exhausted, ``close()``,
context-manager exit, an exception (error status), async cancellation, the SDK helper
closing the HTTP response (seen through httpcore's ``response_closed`` event), or the proxy
being garbage-collected after a ``break`` (then it ends at the last chunk taken).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from time import perf_counter, thread_time
from types import GeneratorType
from typing import Any

from opentelemetry import context as otel_context
from wrapt import ObjectProxy

from ..._log import FAULTS, fault, internal_error
from ..net import CURRENT
from ..protocols._endpoint import Observe
from . import _wire
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


def _is_generator_next(fetch: Any) -> bool:
    """``fetch`` is a generator's own ``__next__``: a generator reading it raises as that
    generator would (``ValueError`` for a second thread, nothing more after an exception)."""
    return type(getattr(fetch, "__self__", None)) is GeneratorType


_CHUNK_SLOTS = ("__weakref__", "busy", "call", "content", "cpu_at", "cpu_first",
                "first_arrivals", "first_chunk", "first_cpu", "following", "gen", "in_next",
                "meta_chunk", "next", "observe", "others", "outputs", "plain_next", "t_first",
                "t_first_chunk", "t_last", "t_other", "usage_chunk")


class _Chunks:
    """Per-chunk state of one stream, in one slots object (one object touched per chunk).

    The endpoint's ``observe(state, chunk)`` sees this object: ``content`` (a list when
    capture is on), ``meta_chunk`` and ``usage_chunk`` are for it to fill.  The call copies
    the marks when it ends (:meth:`LLMCall.finish`) and holds only a weak reference, so a
    stream dropped after ``break`` is freed at once and ``__del__`` ends its call.
    """

    __slots__ = _CHUNK_SLOTS

    observe: Observe
    t_first: float | None
    t_last: float | None  # the last output chunk's hand-over
    t_other: float | None  # the last other chunk's (one time written per chunk, not two)
    t_first_chunk: float | None

    def __init__(self, call: LLMCall, next_chunk: Any) -> None:
        self.call = call
        # ``next`` starts as a wrapper that does the first fetches' extra work (the lazy
        # send, the CPU clock) and is set back to ``plain_next`` at the first output token:
        # one hot path, one class, whatever the stream (a second class running the same
        # code would make CPython's attribute caches miss on every chunk).
        self.next = self.plain_next = next_chunk
        # Only endpoints whose responses never stream (embeddings) leave observe unset.
        self.observe = call.endpoint.observe  # type: ignore[assignment]  # None only where nothing streams
        self.in_next = False
        # Chunks are counted as outputs and others (a role-only delta, the finish and usage
        # chunks, an empty delta), each where it is known which: one count of every chunk
        # would be an integer allocated and freed per chunk past 256, ~270 instructions.
        self.others = self.outputs = 0
        self.t_other = self.t_first = self.t_last = self.t_first_chunk = None
        self.first_chunk = self.meta_chunk = self.usage_chunk = None
        self.first_cpu = 0.0
        self.cpu_first: float | None = None
        self.content = call.content
        # Arrival times (``_wire``): taken until the first output token, and after it while
        # the client may be late.
        self.following: Any = None
        self.first_arrivals: Any = None  # the first token's window's arrival times
        self.busy = False
        self.cpu_at: Any = None
        # The hot path's generator (weakly: it holds this state), when there is one.
        self.gen: Any = None
        call.stream = weakref.ref(self)

    @property
    def chunks(self) -> int:
        """The chunks handed over so far."""
        return self.outputs + self.others

    @property
    def t_chunk(self) -> float | None:
        """When the last chunk, of either kind, was handed over."""
        last, other = self.t_last, self.t_other
        if last is None or (other is not None and other > last):
            return other
        return last

    def fetching(self) -> bool:
        """Inside the source's ``next`` now: an SDK that closes its response there (at the
        stream's end, on an error) leaves the call's end to the hot path, which sees how the
        fetch ended.  The generator's ``gi_running`` says so without a flag set per chunk."""
        gen = self.gen
        if gen is None:
            return self.in_next
        running = gen()
        return running is not None and running.gi_running

    def first_output(self) -> None:
        """The first output token was handed over (once per stream)."""
        self.next = self.plain_next
        _wire.first_output(self)

    def __del__(self) -> None:
        # Kept alive (resurrected) until the call ends at the next safe point.
        abandon_call(self.call, self)


class _SyncChunks(_Chunks):
    """The sync per-chunk state, and the hot path over a source that is not a generator
    (litellm's stream wrapper, another instrumentation's proxy): its ``__next__`` keeps what
    the source does after it raised, or when two threads read it, the source's own."""

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
        t = perf_counter()
        if self.t_first_chunk is None:
            self.t_first_chunk = t
            self.first_chunk = chunk
        try:
            if FAULTS:
                fault("llm.observe")
            if self.observe(self, chunk):
                if self.t_first is None:
                    self.t_first = t
                    self.first_output()
                self.t_last = t
                self.outputs += 1
            else:
                self.t_other = t
                self.others += 1
        except Exception:  # noqa: BLE001 - an odd chunk must not reach the program
            self.t_other = t
            self.others += 1
            internal_error("llm.observe")
        return chunk


def _sync_chunks(state: _SyncChunks) -> Iterator[Any]:
    """The sync per-chunk hot path over a generator, as a generator: a ``for`` loop resumes
    its frame, where a class's ``__next__`` is looked up and given a frame of its own per
    chunk, and what does not change during the stream (the endpoint's ``observe``, the
    counts) is a local, not an attribute read per chunk.  It ends and raises as the source
    generator would.

    Two loops: until the first output token each fetch goes through ``state.next`` (the
    first-fetch wrappers, which replace themselves there), and the first chunk and the first
    token are marked; after it, the source generator is iterated directly.  The state's marks
    are written per chunk all the same: the call may end while the program holds the stream
    (its task's end, the SDK closing the response, a ``break``)."""
    observe = state.observe
    others = 0
    while True:
        try:
            chunk = state.next()
        except StopIteration:
            state.call.finish(None, None, None, state)
            return
        except BaseException as exc:
            state.call.finish(None, exc, None, state)
            raise
        t = perf_counter()
        if not others:
            state.t_first_chunk = t
            state.first_chunk = chunk
        first = False
        try:
            if FAULTS:
                fault("llm.observe")
            if observe(state, chunk):
                state.t_first = state.t_last = t
                state.outputs = outputs = 1
                first = True
                state.first_output()
            else:
                state.t_other = t
                others += 1
                state.others = others
        except Exception:  # noqa: BLE001 - an odd chunk must not reach the program
            if not first:  # (not counted yet)
                state.t_other = t
                others += 1
                state.others = others
            internal_error("llm.observe")
        yield chunk
        if first:
            break
    try:
        for chunk in state.plain_next.__self__:
            t = perf_counter()
            try:
                if FAULTS:
                    fault("llm.observe")
                if observe(state, chunk):
                    state.t_last = t
                    outputs += 1
                    state.outputs = outputs
                else:
                    state.t_other = t
                    others += 1
                    state.others = others
            except Exception:  # noqa: BLE001
                state.t_other = t
                others += 1
                state.others = others
                internal_error("llm.observe")
            yield chunk
    except GeneratorExit:  # closed at a ``yield``: the program dropped or closed the stream
        raise
    except BaseException as exc:
        state.call.finish(None, exc, None, state)
        raise
    state.call.finish(None, None, None, state)


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
        t = perf_counter()
        if self.t_first_chunk is None:
            self.t_first_chunk = t
            self.first_chunk = chunk
        try:
            if FAULTS:
                fault("llm.observe")
            if self.observe(self, chunk):
                if self.t_first is None:
                    self.t_first = t
                    self.first_output()
                self.t_last = t
                self.outputs += 1
            else:
                self.t_other = t
                self.others += 1
        except Exception:  # noqa: BLE001
            self.t_other = t
            self.others += 1
            internal_error("llm.observe")
        return chunk


def _timed_until_first_token(chunks: _Chunks, fetch: Any) -> Any:
    """``fetch`` with the thread's CPU clock read around it (sync streams, until the first
    output token): the CPU time inside the fetch that produced the first token is the
    client's own work after the token's bytes arrived (a library's first-call imports,
    parsing), not the server's prefill.  Async streams are not measured: other tasks run on
    the thread meanwhile."""

    state = weakref.ref(chunks)  # the wrapper lives on ``chunks``: no reference cycle

    def timed() -> Any:
        cpu = thread_time()
        try:
            return fetch()
        finally:
            now = thread_time()
            owner = state()
            if owner is not None:
                owner.cpu_first = now
                owner.first_cpu = now - cpu

    return timed


def _sent_on_first_fetch(chunks: _Chunks, fetch: Any) -> Any:
    """``fetch`` with the call current around the first fetch only: a library that sends its
    request on the first ``next()`` (a generator; litellm's Anthropic path) has its HTTP
    attempt seen and carrying ``traceparent``."""

    state = weakref.ref(chunks)  # the wrapper lives on ``chunks``: no reference cycle
    call = chunks.call

    def first() -> Any:
        owner = state()
        if owner is not None:
            owner.next = fetch
        token = CURRENT.set(call)
        ctx_token = otel_context.attach(call.context)
        try:
            return fetch()
        finally:
            otel_context.detach(ctx_token)
            CURRENT.reset(token)
            if owner is not None:
                _wire.start(owner)

    return first


def _async_sent_on_first_fetch(chunks: _Chunks, fetch: Any) -> Any:
    """:func:`_sent_on_first_fetch` for async streams."""

    state = weakref.ref(chunks)  # the wrapper lives on ``chunks``: no reference cycle
    call = chunks.call

    async def first() -> Any:
        owner = state()
        if owner is not None:
            owner.next = fetch
        token = CURRENT.set(call)
        ctx_token = otel_context.attach(call.context)
        try:
            return await fetch()
        finally:
            otel_context.detach(ctx_token)
            CURRENT.reset(token)
            if owner is not None:
                _wire.start(owner)

    return first


class SyncStream(ObjectProxy):
    """A sync stream (``openai.Stream``, a generator, an iterator) with first-token timing.

    ``iter()`` hands out the hot path's iterator (:func:`_sync_chunks`' generator, or the
    slots iterator), so a ``for`` loop never touches the proxy per chunk; everything else
    (``response``, ``isinstance``) is the SDK stream's.
    """

    def __init__(self, wrapped: Any, call: LLMCall) -> None:
        super().__init__(wrapped)
        self._self_call = call
        fetch = _sdk_next(wrapped, "__next__")
        # The state outlives the proxy in ``for chunk in client...create(stream=True)``
        # (the iterator holds it); its __del__ ends a call nobody finished.
        chunks = _SyncChunks(call, fetch)
        chunks.next = _timed_until_first_token(chunks, chunks.plain_next)
        if call.attempts:
            _wire.start(chunks)
        else:
            chunks.next = _sent_on_first_fetch(chunks, chunks.next)
        if _is_generator_next(fetch):
            self._self_chunks = gen = _sync_chunks(chunks)
            chunks.gen = weakref.ref(gen)
        else:
            self._self_chunks = chunks
        call.defer()

    def __iter__(self) -> Any:
        return self._self_chunks

    def __next__(self) -> Any:
        return next(self._self_chunks)

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


class AsyncStream(ObjectProxy):
    """An async SDK stream with first-token timing; cancellation ends the call with an error."""

    def __init__(self, wrapped: Any, call: LLMCall) -> None:
        super().__init__(wrapped)
        self._self_call = call
        self._self_chunks = chunks = _AsyncChunks(call, _sdk_next(wrapped, "__anext__"))
        if call.attempts:
            _wire.start(chunks)
        else:
            chunks.next = _async_sent_on_first_fetch(chunks, chunks.next)
        call.defer()

    def __aiter__(self) -> Any:
        return self._self_chunks

    def __anext__(self) -> Any:
        return self._self_chunks.__anext__()

    async def close(self) -> Any:
        try:
            closer = getattr(self.__wrapped__, "close", None) or self.__wrapped__.aclose
            return await closer()
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


# ``hasattr(cls, name)`` per (class, name) asked: a pydantic model's class answers a name
# it lacks from its metaclass's ``__getattr__``, a Python frame and a raised AttributeError
# each time (three per plain call: a response is asked whether it streams or parses).
_CLASS_HAS: dict[tuple[type, str], bool] = {}


def class_has(cls: type, name: str) -> bool:
    """``hasattr(cls, name)``, remembered per class (result types are few and fixed)."""
    key = (cls, name)
    has = _CLASS_HAS.get(key)
    if has is None:
        if len(_CLASS_HAS) >= 512:
            _CLASS_HAS.clear()
        has = _CLASS_HAS[key] = hasattr(cls, name)
    return has


#: What a result's class is, as bits: a stream (``__next__`` or ``__anext__``), a raw
#: response (``parse``).
STREAM = 1
RAW = 2
#: The bits of each class seen (:func:`traits_of`): read with ``.get`` first, inline, by the
#: hot path (a result is looked at on every call).
TRAITS: dict[type, int] = {}


def traits_of(cls: type) -> int:
    """The :data:`STREAM` and :data:`RAW` bits of ``cls``, remembered in :data:`TRAITS`."""
    traits = ((STREAM if class_has(cls, "__next__") or class_has(cls, "__anext__") else 0)
              | (RAW if class_has(cls, "parse") else 0))
    if len(TRAITS) >= 512:
        TRAITS.clear()
    TRAITS[cls] = traits
    return traits


def is_sync_stream(obj: Any) -> bool:
    """A sync stream: its type defines ``__next__`` (a pydantic model only ``__iter__``)."""
    return class_has(type(obj), "__next__")


def is_async_stream(obj: Any) -> bool:
    """An async stream: its type defines ``__anext__``."""
    return class_has(type(obj), "__anext__")


def wrap_stream(obj: Any, call: LLMCall) -> Any:
    """Our proxy around a stream, or ``obj`` itself when it is not one.

    Sync or async follows the call (other instrumentations' stream proxies, and litellm's
    stream wrapper, define both ``__next__`` and ``__anext__``).
    """
    if call.is_async:
        return AsyncStream(obj, call) if is_async_stream(obj) else obj
    return SyncStream(obj, call) if is_sync_stream(obj) else obj
