"""One LLM call: its span, its HTTP attempts, its stream marks, and how it ends (once)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from time import perf_counter
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer

from ... import _hooks, semconv
from ..._env import capture_content, env_choice, env_flag
from ..._log import FAULTS, fault, internal_error, warn_once
from ..._pauses import PAUSES
from ..._scope import current_task_id
from ..._scope import tracer as global_tracer
from ..._sdk import start_span
from ..._version import __version__
from ..net import Arrival, Attempt, NetPhases
from ..protocols import Endpoint, provider_of_host
from . import _wire
from ._info import Info
from ._instruments import Instruments, global_instruments
from ._output_events import is_output_event
from ._record import record

# How the call ends; ``deferred`` means a stream or an unread response was handed out.
_OPEN, _DEFERRED, _DONE = 0, 1, 2


class Settings:
    """What an instrumentor read once, at ``instrument()`` time: where spans and metrics go,
    whether content is captured, ``traceparent`` injected, phase spans made, and when
    arrival times are taken from the wire (``arrivals``: auto, always or off).

    Without an explicit ``tracer_provider`` / ``meter_provider`` the global ones are used
    as they are when each call starts (a program may set them after ``instrument()``).
    """

    __slots__ = ("_instruments", "_tracer", "active", "arrivals", "capture", "phase_spans",
                 "propagate")

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None,
                 capture: bool | None = None, propagate: bool | None = None,
                 phase_spans: bool | None = None) -> None:
        self.active = True  # False once the instrumentor that read them is uninstrumented
        self.capture = capture_content() if capture is None else capture
        self.propagate = (env_flag(semconv.ENV_PROPAGATE, True) if propagate is None
                          else propagate)
        self.phase_spans = (env_flag(semconv.ENV_PHASE_SPANS, True) if phase_spans is None
                            else phase_spans)
        self.arrivals = env_choice(semconv.ENV_ARRIVALS, "auto", semconv.ARRIVALS_CHOICES)
        self._tracer = (tracer_provider.get_tracer("agent_latency", __version__)
                        if tracer_provider is not None else None)
        self._instruments = (Instruments(meter_provider) if meter_provider is not None
                             else None)

    @classmethod
    def from_instrument_kwargs(cls, kwargs: Mapping[str, Any]) -> Settings:
        """Settings from ``BaseInstrumentor.instrument(**kwargs)``."""
        return cls(tracer_provider=kwargs.get("tracer_provider"),
                   meter_provider=kwargs.get("meter_provider"))

    def tracer(self) -> Tracer:
        """The tracer spans start on."""
        return self._tracer if self._tracer is not None else global_tracer()

    def instruments(self) -> Instruments:
        """The histograms calls are recorded on."""
        return self._instruments if self._instruments is not None else global_instruments()


# The request's numeric settings recorded on its span (keyword, attribute), in the order a
# later one wins.
_REQUEST_NUMBERS = (("max_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
                    ("max_completion_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
                    ("max_output_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
                    ("temperature", semconv.GEN_AI_REQUEST_TEMPERATURE))
_NUMBER = (int, float)


class LLMCall:
    """One model request, from the SDK method call to the end of its response."""

    #: Which of a response's events carry output, read from the wire's bytes.
    classify_event = staticmethod(is_output_event)

    __slots__ = (
        "__weakref__", "attempts", "capture", "chunks", "content", "context", "cpu_first",
        "deferred", "end_arrival", "endpoint", "first_arrival", "first_chunk", "first_cpu",
        "in_next", "info", "is_async", "kwargs", "last_arrival",
        "lock", "meta_chunk", "model", "net", "outputs", "propagate", "provider",
        "server_address", "server_port", "settings", "span", "start_ns", "state", "stream",
        "streaming", "t_call", "t_chunk", "t_first", "t_first_chunk", "t_last", "t_return",
        "task", "tracer", "wants_arrivals",
        "usage_chunk",
    )

    def __init__(self, endpoint: Endpoint, settings: Settings, model: str,
                 kwargs: Mapping[str, Any], *, streaming: bool,
                 server: tuple[str | None, int | None] = (None, None),
                 provider: str | None = None, t_call: float | None = None) -> None:
        # ``t_call``: when the request started, if before now (a call recognised on the wire
        # starts where its new connection's setup started).
        now = perf_counter()
        self.start_ns = time.time_ns()
        self.t_call = now
        if t_call is not None and t_call < now:
            self.t_call = t_call
            self.start_ns -= round((now - t_call) * 1e9)
        self.endpoint = endpoint
        self.settings = settings
        # Named for the host where it is a known provider's (the openai SDK sent to Groq).
        self.provider = provider or provider_of_host(*server) or endpoint.provider
        self.model = model
        self.kwargs = kwargs
        self.streaming = streaming
        self.propagate = settings.propagate
        # Arrival times are taken on its attempts' connections (the network layer's owner).
        self.wants_arrivals = settings.arrivals != "off"
        self.capture = capture = settings.capture
        self.server_address, self.server_port = server
        self.attempts: list[Attempt] = []
        self.net = NetPhases()  # socket-level DNS/connect/TLS while the call is current
        self.chunks = self.outputs = 0
        # The end a garbage collection found, put off to a safe point (``finish``).
        self.deferred: tuple[float, BaseException | None, Any, Any] | None = None
        self.in_next = False
        self.is_async = False
        self.stream: Any = None  # the per-chunk state of a stream (see _stream._Chunks)
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.t_first_chunk: float | None = None
        self.t_chunk: float | None = None
        self.t_return: float | None = None
        self.first_chunk: Any = None
        self.first_cpu = 0.0
        self.cpu_first: float | None = None
        # When the first and last output tokens' bytes and the response's last byte reached
        # this host (``_wire``), where they were taken.
        self.first_arrival: Arrival | None = None
        self.last_arrival: Arrival | None = None
        self.end_arrival: Arrival | None = None
        self.meta_chunk: Any = None
        self.usage_chunk: Any = None
        self.content: list[str] | None = [] if capture else None
        self.info = Info()
        self.state = _OPEN
        self.lock = threading.Lock()
        # The task it started in (its span id): the task's end ends a stream still open.
        self.task = current_task_id()
        attrs: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: endpoint.operation,
            semconv.GEN_AI_PROVIDER_NAME: self.provider,
            semconv.GEN_AI_REQUEST_STREAM: streaming,
            semconv.LLM_STREAMING: streaming,
        }
        if model:
            attrs[semconv.GEN_AI_REQUEST_MODEL] = model
        if self.server_address:
            attrs[semconv.SERVER_ADDRESS] = self.server_address
        if self.server_port:
            attrs[semconv.SERVER_PORT] = self.server_port
        for key, attr in _REQUEST_NUMBERS:
            value = kwargs.get(key)
            if value is not None and type(value) is not bool and isinstance(value, _NUMBER):
                attrs[attr] = value
        name = f"{endpoint.operation} {model}" if model else endpoint.operation
        # Kept: the phase spans are made on the tracer the call span started on.
        self.tracer = tracer = settings.tracer()
        self.span = start_span(tracer, name, SpanKind.CLIENT, attrs, self.start_ns)
        self.context = trace.set_span_in_context(self.span)

    # -- HTTP attempts -------------------------------------------------------------
    def add_attempt(self, attempt: Attempt) -> None:
        attempt.on_closed = self._response_closed
        self.attempts.append(attempt)

    def _response_closed(self, attempt: Attempt, t: float) -> None:
        # The final attempt's response closed after a stream/response was handed out:
        # covers helpers that close the HTTP response rather than our proxy.
        # While our proxy is inside the SDK's __next__, the proxy ends the call itself (it
        # sees the exception, if any).
        stream = self.stream() if self.stream is not None else None
        if (self.state == _DEFERRED and not self.in_next and self.attempts
                and attempt is self.attempts[-1]
                and (stream is None or not stream.fetching())):
            self.finish(t)

    # -- ends ------------------------------------------------------------------------
    def defer(self) -> None:
        """A stream or an unread response was handed to the program; it ends later."""
        self.t_return = perf_counter()
        self.state = _DEFERRED
        if self.task:
            _hooks.hold(self.task, id(self), self.end_with_task)

    def end_with_task(self) -> None:
        """Its task ends while the program still holds the stream: the call ends here, at
        the last chunk read, marked abandoned.  Chunks read later are noted, not counted."""
        if self.state != _DEFERRED:
            return
        try:
            self.span.set_attribute(semconv.LLM_ABANDONED, True)
        except Exception:  # noqa: BLE001, S110 - the call still ends below
            pass
        self.abandon()
        self.task = -1  # ended by its task: see _note_late

    def finish(self, t_end: float | None = None, error: BaseException | None = None,
               response: Any = None, stream: Any = None) -> None:
        """End the call (idempotent): compute its phases, set attributes, end the span.

        Inside a garbage collection (a stream or response freed there, the SDK's generator
        closed by it) it ends at the next safe point instead (``_hooks.later``), with the
        times of now: a finalizer runs wherever the collection began, maybe under a lock the
        SDK holds (its tracer provider's, its batch processor's), and ending a span there
        waited on that lock for ever."""
        if PAUSES.collecting() and self.state != _DONE:
            # One end per call, the stream's if one of the ends found has it: the collection
            # clears weak references before finalizers run, so the SDK's generator closing
            # the response cannot reach the stream, and its state would be lost.
            first = self.deferred is None
            if first or (stream is not None and self.deferred[3] is None):  # type: ignore[index]
                self.deferred = (perf_counter() if t_end is None else t_end, error, response,
                                 stream)
            if first:
                _hooks.later(self._finish_deferred)
            return
        if self.state == _DONE or not self.lock.acquire(blocking=False):
            if self.task == -1 and stream is not None:
                self._note_late(stream)
            return
        try:
            if FAULTS:
                fault("llm.finish")
            if self.state == _DONE:
                return
            self.state = _DONE
            if t_end is None:
                t_end = perf_counter()
            if stream is None and self.stream is not None:
                stream = self.stream()
            if stream is not None:
                self._absorb_stream(stream)
            self._stop_following()
            record(self, t_end, error, response)
        except Exception:  # noqa: BLE001
            internal_error("llm.finish")
            try:
                self.span.end()
            except Exception:  # noqa: BLE001, S110 - already reported as llm.finish
                pass
        finally:
            if self.task > 0:
                _hooks.release(self.task, id(self))
            self.kwargs = {}
            self.first_chunk = self.meta_chunk = self.usage_chunk = None
            self.stream = None
            self.lock.release()

    def _stop_following(self) -> None:
        # A body read to its end (not streamed): its last byte, dated from the wire.
        attempts = self.attempts
        if attempts:
            following = attempts[-1].following
            if following is not None and self.end_arrival is None:
                self.end_arrival = following.arrivals.last_byte()
        for attempt in attempts:
            attempt.stop_following()

    def _absorb_stream(self, stream: Any) -> None:
        _wire.finish(stream, self)
        self.chunks, self.outputs = stream.chunks, stream.outputs
        self.first_cpu, self.cpu_first = stream.first_cpu, stream.cpu_first
        self.t_first, self.t_last = stream.t_first, stream.t_last
        self.t_first_chunk, self.t_chunk = stream.t_first_chunk, stream.t_chunk
        self.first_chunk = stream.first_chunk
        self.meta_chunk, self.usage_chunk = stream.meta_chunk, stream.usage_chunk
        stream.first_chunk = stream.meta_chunk = stream.usage_chunk = None

    def _note_late(self, stream: Any) -> None:
        """The stream of a call its task ended was read on, and has now ended too."""
        self.task = 0
        late = getattr(stream, "chunks", 0) - self.chunks
        if late > 0:
            warn_once("stream-after-task", "agent-latency: a stream was read after its task "
                      "ended (%d more chunks); the call was counted in the task up to its end, "
                      "the rest is in no budget", late)

    def _finish_deferred(self) -> None:
        deferred, self.deferred = self.deferred, None
        if deferred is not None:
            self.finish(*deferred)

    def abandon(self, stream: Any = None) -> None:
        """The stream was garbage-collected unfinished: it ended at the last chunk taken."""
        if self.state == _DONE:
            if self.task == -1 and stream is not None:
                self._note_late(stream)
            return
        if stream is None and self.stream is not None:
            # Ended from outside the stream (its task's end, the SDK object's finalizer): the
            # marks are still on the stream's own state, not copied onto the call yet.
            stream = self.stream()
        last = stream.t_chunk if stream is not None else self.t_chunk
        marks = [t for t in (last, self.t_return) if t is not None]
        self.finish(max(marks) if marks else None, None, None, stream)



def abandon_call(call: LLMCall, stream: Any = None) -> None:
    """A stream or response was dropped unfinished: its call ends (at the next safe point
    when a garbage collection dropped it: :meth:`LLMCall.finish`).  Also a
    ``weakref.finalize`` target (a plain function, so it keeps no proxy alive)."""
    try:
        if FAULTS:
            fault("llm.abandon")
        call.abandon(stream)
    except Exception:  # noqa: BLE001
        internal_error("llm.abandon")
