"""Exporters of ours that fail quietly and once: a dead or wrong backend never floods the
host's log, never slows its exit past a bound, and is counted.

Every exporter ``instrument()`` builds is wrapped:

* the first failure per destination is one warning; the exporter's own per-batch log lines
  (the OTLP exporters log each failed batch and each retry) are held back while our export
  runs, and their text becomes the reason in that warning;
* a metrics endpoint that answers 404, 405 or ``UNIMPLEMENTED`` takes no metrics (Phoenix,
  Jaeger): one warning saying to set ``OTEL_METRICS_EXPORTER=none``, then metrics export
  stops while traces go on;
* at exit, providers we built are shut down within ``AGENT_LATENCY_EXIT_TIMEOUT`` seconds
  (default 2) whatever the backend does, and each destination that failed gets one line
  with its count;
* spans that find the batch processor's queue full (a burst that ends more spans than
  ``OTEL_BSP_MAX_QUEUE_SIZE`` before the exporter catches up; the SDK logs the first and
  counts none) and spans still queued when the exit bound runs out are counted too: the
  count of spans lost is every span that never reached the destination.

The wrappers read two private fields of the SDK's exporters (the endpoint, for the message,
and a metric exporter's preferred temporality and aggregation, which the SDK's periodic
reader reads straight from the exporter); nothing else here depends on SDK internals.
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from . import semconv
from ._locks import ForkSafeLock
from ._log import Guard, logger
from ._sdk import (
    batch_processors,
    exporter_endpoint,
    preferred_aggregation,
    preferred_temporality,
    span_batch_queue,
)

DEFAULT_EXIT_TIMEOUT_S = 2.0
# The bound in force (AGENT_LATENCY_EXIT_TIMEOUT, read by instrument()): the exit flush, a
# multiprocessing worker's last flush and the flush on a fatal signal all keep to it.
exit_timeout_s = DEFAULT_EXIT_TIMEOUT_S
# The loggers of the exporters that log every failed batch and retry.
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
    "opentelemetry.exporter.zipkin.json",
)
_NO_METRICS_HERE = re.compile(r"\bcode: (404|405)\b|UNIMPLEMENTED")


class _Held(threading.local):
    """Per thread: the destination of our export running now, and the last message its
    exporter logged (held back)."""

    def __init__(self) -> None:
        self.destination: Destination | None = None
        self.reason: str | None = None


_held = _Held()


class _HoldBackOurExportLogs(logging.Filter):
    """Keeps the exporter's own warnings out of the log while one of *our* exports runs on
    this thread (the host's exporters log as they always did)."""

    def filter(self, record: logging.LogRecord) -> bool:
        destination = _held.destination
        if destination is None or record.levelno < logging.WARNING:
            return True
        try:
            _held.reason = record.getMessage()[:300]
        except Exception:  # noqa: BLE001 - a malformed record is still held back
            _held.reason = record.msg if isinstance(record.msg, str) else None
        # A retry in progress is trouble already: say so now, not after the retries.
        destination.trouble(_held.reason)
        return False


_filter = _HoldBackOurExportLogs()
_filter_installed = False
# Every guard made (each with its destination): the exit flush and the report go over them.
_guards: list[Any] = []
# Set by the exit flush: from then on, trouble ends an exporter's retries at once.
_exiting = False
_registry_lock = threading.Lock()


class Destination:
    """One place our data goes, and how exporting there has gone this run."""

    __slots__ = ("batches", "dropped", "failures", "give_up", "healthy", "lock", "name",
                 "not_queued", "signal", "stopped", "warned")

    def __init__(self, signal: str, name: str, *, warns_itself: bool = False) -> None:
        self.signal = signal  # "spans" or "metrics"
        self.name = name
        self.batches = 0
        self.failures = 0
        self.dropped = 0
        self.not_queued = 0  # of ``dropped``: spans a full queue dropped before any export
        self.healthy = True  # the last export succeeded (or none ran yet)
        self.give_up: Any = None  # ends the exporter's retries (set by its guard)
        self.stopped = False
        # Our own exporters (the local file) already say once what went wrong.
        self.warned = warns_itself
        self.lock = threading.Lock()

    def succeeded(self) -> None:
        with self.lock:
            self.batches += 1
            self.healthy = True

    def failed(self, items: int, reason: str | None) -> None:
        with self.lock:
            self.batches += 1
            self.failures += 1
            self.dropped += items
        self.trouble(reason)

    def trouble(self, reason: str | None) -> None:
        """The exporter failed or is retrying: one warning per destination and run."""
        with self.lock:
            self.healthy = False
            first, self.warned = not self.warned, True
        if _exiting and self.give_up is not None:
            # Retrying now would only spend the exit bound: what is left is lost, and said so.
            self.give_up()
        if self.signal == "metrics" and reason and _NO_METRICS_HERE.search(reason):
            if not self.stopped:
                self.stopped = True
                logger.warning(
                    "agent-latency: %s takes no metrics (%s): it looks like a trace-only "
                    "backend. Set OTEL_METRICS_EXPORTER=none, or send metrics elsewhere with "
                    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT; metrics export stopped, traces go on",
                    self.name, reason)
            return
        if first:
            logger.warning("agent-latency: cannot export %s to %s (%s); later failures are "
                           "counted and reported at exit", self.signal, self.name,
                           reason or "the exporter reported a failure")

    def lost(self, items: int, *, queue_full: bool = False) -> None:
        """``items`` that never reached the destination without an export failing."""
        with self.lock:
            self.dropped += items
            if queue_full:
                self.not_queued += items

    def report(self) -> None:
        if self.stopped or not (self.failures or self.dropped):
            return
        what = "spans" if self.signal == "spans" else "points"
        burst = "a burst filled the export queue (raise OTEL_BSP_MAX_QUEUE_SIZE)"
        if self.failures:
            logger.warning("agent-latency: %d of %d exports of %s to %s failed; %d %s lost%s",
                           self.failures, self.batches, self.signal, self.name, self.dropped,
                           what, f", {self.not_queued} of them because {burst}"
                           if self.not_queued else "")
        elif self.not_queued == self.dropped:
            logger.warning("agent-latency: %d %s never reached %s: %s", self.dropped, what,
                           self.name, burst)
        else:
            logger.warning("agent-latency: %d %s never reached %s (%d because %s, the rest "
                           "still queued when the exit bound ran out)", self.dropped, what,
                           self.name, self.not_queued, burst)


def _register(guard: Any, signal: str, exporter: object) -> Destination:
    """The destination of a new ``guard`` around ``exporter``; the guard is remembered."""
    global _filter_installed
    name = str(exporter_endpoint(exporter) or getattr(exporter, "path", None)
               or type(exporter).__name__)
    destination = Destination(signal, name, warns_itself=type(exporter).__module__.startswith(
        "agent_latency."))
    destination.give_up = guard.shutdown
    with _registry_lock:
        _guards.append(guard)
        if not _filter_installed:
            for logger_name in _EXPORTER_LOGGERS:
                logging.getLogger(logger_name).addFilter(_filter)
            _filter_installed = True
    return destination


def _run_export(destination: Destination, items: int, export: Any, *args: Any) -> bool:
    """Runs one export with the exporter's own log lines held back; True on success."""
    outer = _held.destination
    _held.destination, _held.reason = destination, None
    try:
        ok = export(*args)
    except Exception as exc:  # noqa: BLE001 - an exporter's bug is a failed export
        ok, _held.reason = False, f"{type(exc).__name__}: {exc}"
    finally:
        _held.destination = outer
    if ok:
        destination.succeeded()
    else:
        destination.failed(items, _held.reason)
    return bool(ok)


class GuardedSpanExporter(SpanExporter):
    """A span exporter of ours, failing quietly and once (see the module's docstring)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.is_shut_down = False
        self.destination = _register(self, "spans", inner)

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        ok = _run_export(self.destination, len(spans),
                         lambda: self.inner.export(spans) is SpanExportResult.SUCCESS)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        if self.is_shut_down:  # at exit, and again by its processor
            return
        self.is_shut_down = True
        try:
            self.inner.shutdown()
        except Exception:  # noqa: BLE001
            logger.debug("agent-latency: exporter shutdown failed", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            return bool(self.inner.force_flush(timeout_millis))
        except Exception:  # noqa: BLE001
            return False


_queue_lock = ForkSafeLock()
# How long the exit waits, at most, for room in a full queue for the span that says how
# many spans were lost.
_ROOM_WAIT_S = 0.5


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """The SDK's batch span processor, counting the spans it loses: each span that finds
    the queue full (the SDK would drop its oldest span and log only the first time), and at
    exit each one still queued when the bound ran out.  The count goes to the guarded
    exporter's destination (the exit line)."""

    def __init__(self, exporter: GuardedSpanExporter, **settings: Any) -> None:
        super().__init__(exporter, **settings)
        self.destination = exporter.destination
        with _registry_lock:
            _counting.append(self)

    def on_end(self, span: ReadableSpan) -> None:
        queue = span_batch_queue(self)
        if queue is None or queue.maxlen is None or not span.context.trace_flags.sampled:
            super().on_end(span)
            return
        # A full queue would drop its oldest span for this one, uncounted: this one is
        # dropped instead, and counted.  One at a time, so that the queue cannot fill
        # between the look and the span going in (the worker only ever takes spans out).
        with _queue_lock:
            full = len(queue) >= queue.maxlen
            if not full:
                super().on_end(span)
        if full:
            self.destination.lost(1, queue_full=True)

    def say_losses(self, tracer: Any) -> None:
        """A span stating how many spans found the queue full, for whoever reads the
        destination (``agent-latency report`` states it); none when none did."""
        lost = self.destination.not_queued
        queue = span_batch_queue(self)
        if not lost or queue is None or queue.maxlen is None:
            return
        give_up = time.monotonic() + _ROOM_WAIT_S
        while len(queue) >= queue.maxlen and time.monotonic() < give_up:
            time.sleep(0.01)  # the burst is over: the exporter makes room
        # A root of its own: in no task, whatever is current at exit.
        tracer.start_span(semconv.SPANS_LOST_SPAN, context=Context(), attributes={
            semconv.SPANS_LOST: lost}).end()

    def count_left_behind(self) -> None:
        """Spans still queued (the exit bound ran out before they were exported): lost."""
        queue = span_batch_queue(self)
        if queue:
            self.destination.lost(len(queue))
            queue.clear()


# Every counting processor made: the exit flush counts what each left behind.
_counting: list[CountingBatchSpanProcessor] = []


_metric_guard: list[type] = []


def _guarded_metric_exporter_class() -> type:
    """The metric guard, defined on first use: the SDK's metrics package is start-up time a
    program that exports no metrics never needs."""
    if _metric_guard:
        return _metric_guard[0]
    # The SDK's metrics package: start-up time a program without metrics never needs.
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

    class GuardedMetricExporter(MetricExporter):
        """A push metric exporter of ours: fails quietly and once, stops on a trace-only
        backend."""

        def __init__(self, inner: MetricExporter) -> None:
            # The SDK's periodic reader reads these two straight from the exporter.
            super().__init__(
                preferred_temporality=preferred_temporality(inner),
                preferred_aggregation=preferred_aggregation(inner))
            self.inner = inner
            self.is_shut_down = False
            self.destination = _register(self, "metrics", inner)

        def export(self, metrics_data: Any, timeout_millis: float = 10_000,
                   **kwargs: Any) -> MetricExportResult:
            if self.destination.stopped:
                return MetricExportResult.FAILURE
            points = _count_points(metrics_data)
            ok = _run_export(self.destination, points, lambda: self.inner.export(
                metrics_data, timeout_millis=timeout_millis, **kwargs
            ) is MetricExportResult.SUCCESS)
            return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            try:
                return bool(self.inner.force_flush(timeout_millis=timeout_millis))
            except Exception:  # noqa: BLE001
                return False

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            if self.is_shut_down:
                return
            self.is_shut_down = True
            try:
                self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)
            except Exception:  # noqa: BLE001
                logger.debug("agent-latency: metric exporter shutdown failed", exc_info=True)

    _metric_guard.append(GuardedMetricExporter)
    return GuardedMetricExporter


def _count_points(metrics_data: Any) -> int:
    try:
        return sum(len(m.data.data_points) for rm in metrics_data.resource_metrics
                   for sm in rm.scope_metrics for m in sm.metrics)
    except Exception:  # noqa: BLE001
        return 0


def guard_span_exporter(exporter: SpanExporter) -> SpanExporter:
    """``exporter`` wrapped so that it fails quietly and once."""
    return GuardedSpanExporter(exporter)


def counting_batch_processor(exporter: SpanExporter, **settings: Any) -> BatchSpanProcessor:
    """A batch span processor around ``exporter`` (guarded) that counts every span lost."""
    return CountingBatchSpanProcessor(GuardedSpanExporter(exporter), **settings)


def guard_metric_reader_exporter(exporter: Any) -> Any:
    """A push metric exporter wrapped; anything else (a pull reader) as it is."""
    # The SDK's metrics package: start-up time a program without metrics never needs.
    from opentelemetry.sdk.metrics.export import MetricExporter

    if not isinstance(exporter, MetricExporter):
        return exporter
    return _guarded_metric_exporter_class()(exporter)


def shut_down_within(providers: Sequence[Any], timeout_s: float) -> bool:
    """Shuts ``providers`` down (their final flush included) within ``timeout_s`` seconds;
    False when the bound ran out first (what was still being sent is abandoned: the thread
    doing it is a daemon, and the process exits without it)."""
    global _exiting
    if not providers:
        return True
    _exiting = True
    # A destination that is failing now would only spend the bound on retries: its exporter
    # is shut down first, which ends them; what it still holds is counted as lost.
    for guard in list(_guards):
        if not guard.destination.healthy:
            guard.shutdown()

    def shut_down() -> None:
        for provider in providers:
            try:
                provider.shutdown()
            except Exception:  # noqa: BLE001
                logger.debug("agent-latency: provider shutdown failed", exc_info=True)

    started = time.monotonic()
    worker = threading.Thread(target=shut_down, name="agent-latency-exit-flush", daemon=True)
    try:
        worker.start()
    except RuntimeError:
        # CPython 3.12.0 and 3.12.1 refuse new threads once shutdown began ("can't create
        # new thread at interpreter shutdown"), and atexit hooks run after that point.
        _shut_down_here(providers, started + timeout_s)
    else:
        worker.join(timeout_s)
        if not worker.is_alive():
            return True
    if time.monotonic() - started < timeout_s:
        return True
    logger.warning("agent-latency: the exporters did not finish within %.1f s at exit "
                   "(AGENT_LATENCY_EXIT_TIMEOUT); what was still being sent is lost",
                   time.monotonic() - started)
    return False


def _shut_down_here(providers: Sequence[Any], deadline: float) -> None:
    """Shut ``providers`` down on this thread, within ``deadline`` (``time.monotonic``).

    The exports themselves run on threads that already exist (each batch span processor's
    worker, each periodic metric reader's), and the shutdowns below wait for them with the
    time left, so a backend that hangs cannot hold the exit here either.
    """
    for provider in providers:
        try:
            for batch in batch_processors(provider):
                batch.shutdown(timeout_millis=_millis_left(deadline))
            shutdown = provider.shutdown
            if "timeout_millis" in inspect.signature(shutdown).parameters:
                shutdown(timeout_millis=_millis_left(deadline))  # a meter provider
            else:
                shutdown()  # its batch processors are already shut down: returns at once
        except Exception:  # noqa: BLE001 - the next provider is still flushed
            logger.debug("agent-latency: provider shutdown failed", exc_info=True)


def _millis_left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0) * 1000


@Guard("exit: spans lost")
def say_losses(tracer: Any) -> None:
    """Before the exit flush: a span per processor of ours whose queue dropped spans,
    saying how many (the report reads it)."""
    with _registry_lock:
        counting = list(_counting)
    for processor in counting:
        processor.say_losses(tracer)


def report_failures() -> None:
    """One line per destination that failed or lost spans this run, with its counts."""
    with _registry_lock:
        guards = list(_guards)
        counting = list(_counting)
    for processor in counting:
        processor.count_left_behind()
    for guard in guards:
        guard.destination.report()
