"""``instrument()`` and ``uninstrument()``: set up what budgets need, respecting the host.

A provider the program already set is never replaced: our budget processor (and, when
asked, the summary printer) is added to the program's own SDK tracer provider, and our
instruments come from its meter provider.  When the program set none, one is built from the
standard ``OTEL_*`` variables: OTLP when an endpoint or ``OTEL_TRACES_EXPORTER`` says so,
otherwise the embedded local default (``.agent-latency/traces.jsonl`` plus a line per
finished task on stderr).  ``OTEL_SDK_DISABLED=true`` turns everything off.  Unless
something already made the process a task, the whole process becomes one
(``AGENT_LATENCY_PROCESS_TASK``; ``_process.py``).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from . import _lifecycle, semconv
from ._env import (
    batch_span_settings,
    env_flag,
    env_int,
    env_number,
    metric_reader_settings,
)
from ._local import JsonLinesSpanExporter, TaskSummaryPrinter
from ._log import FAULTS, fault, internal_error, logger, warn_once
from ._scope import end_open_tasks
from .processor import BudgetSpanProcessor


@dataclass
class _State:
    """What ``instrument()`` did, so ``uninstrument()`` can undo it."""

    processor: BudgetSpanProcessor | None = None
    summary: SpanProcessor | None = None
    tracer_provider: TracerProvider | None = None
    owns_provider: bool = False
    instrumentors: list[Any] = field(default_factory=list)
    traces_path: Path | None = None


_state: _State | None = None
_lock = threading.Lock()
_atexit_registered = False


def is_instrumented() -> bool:
    """Whether ``instrument()`` is in effect."""
    return _state is not None


def instrument(
    *, summary: bool | None = None, targets: list[str] | None = None,
    meter_provider: metrics.MeterProvider | None = None, process_task: bool | None = None,
) -> bool:
    """Instrument this process; returns False when the OTel SDK is disabled.

    ``summary`` prints a line per finished task on stderr (default: on with the local
    default, off when spans go to a backend; ``AGENT_LATENCY_SUMMARY`` overrides).
    ``targets`` limits which instrumentations load (default: every one whose library is
    installed).  ``process_task`` makes the whole process one task when nothing else does
    (default on; ``False`` or ``AGENT_LATENCY_PROCESS_TASK=false`` turns it off): tasks the
    program opens nest inside it.  Calling it twice is harmless.
    """
    fresh = _instrument(summary, targets, meter_provider)
    if fresh is None:
        return False
    # Decided by the first call only: a second one is harmless, whatever its arguments.
    # Either switch turns it off (agent-latency run's bootstrap passes False, whatever the
    # environment says: it opens its own).
    if fresh and process_task is not False and env_flag(semconv.ENV_PROCESS_TASK, True):
        _open_implicit_process_task()
    return True


def _instrument(summary: bool | None, targets: list[str] | None,
                meter_provider: metrics.MeterProvider | None) -> bool | None:
    """Providers, processors and instrumentations; True when this call set them up, False
    when an earlier one did, None when the SDK is disabled."""
    global _state, _atexit_registered
    if env_flag("OTEL_SDK_DISABLED", False):
        logger.info("agent-latency: OTEL_SDK_DISABLED is set; not instrumenting")
        return None
    with _lock:
        if _state is not None:
            return False
        state = _State()
        provider = trace.get_tracer_provider()
        local_default = False
        if not hasattr(provider, "add_span_processor"):
            if _is_proxy(provider):
                provider, local_default, path = _build_tracer_provider()
                state.owns_provider = True
                state.traces_path = path
            else:
                warn_once("foreign-provider", "agent-latency: the tracer provider %s is not the "
                          "OpenTelemetry SDK's; spans are made but no budget is computed",
                          type(provider).__name__)
                provider = None
        if provider is not None:
            state.tracer_provider = provider  # type: ignore[assignment]
            state.processor = BudgetSpanProcessor(
                meter_provider or _meter_provider(),
                max_open_tasks=env_int(semconv.ENV_MAX_OPEN_TASKS, 10_000, maximum=10**8),
                max_task_age=env_number(semconv.ENV_TASK_MAX_AGE, 24 * 3600.0,
                                        maximum=10 * 366 * 24 * 3600.0),
            )
            # Budget first: its on_end must run before exporters' in the same provider.
            provider.add_span_processor(state.processor)  # type: ignore[union-attr]
            if env_flag(semconv.ENV_SUMMARY, local_default if summary is None else summary):
                state.summary = TaskSummaryPrinter()
                provider.add_span_processor(state.summary)  # type: ignore[union-attr]
            if state.owns_provider:
                trace.set_tracer_provider(provider)  # type: ignore[arg-type]
        from .instrumentation import _all

        state.instrumentors = _all.instrument_all(targets)
        _state = state
        _lifecycle.install()
        if not _atexit_registered:
            # Registered after the provider, so it runs before the provider's own shutdown.
            atexit.register(_at_exit)
            _atexit_registered = True
        return True  # set up by this call


def uninstrument() -> None:
    """Undo ``instrument()``: end the implicit process task, unpatch every target and stop
    computing budgets.

    A provider we built stays the global one (OpenTelemetry allows setting it once) but is
    flushed; budget processing stops.
    """
    global _state
    with _lock:
        state, _state = _state, None
    if state is None:
        return
    from .instrumentation import _all

    _all.cancel_pending()
    from ._process import process_task

    if process_task.is_open and process_task.implicit:
        process_task.end()  # with its budget, while the processor still computes them
    for instrumentor in state.instrumentors:
        try:
            instrumentor.uninstrument()
        except Exception:  # noqa: BLE001
            logger.debug("agent-latency: uninstrumenting %r failed", instrumentor, exc_info=True)
    if state.processor is not None:
        state.processor.shutdown()
    if state.summary is not None:
        state.summary.shutdown()
    if state.owns_provider and state.tracer_provider is not None:
        state.tracer_provider.force_flush()


def budget_processor() -> BudgetSpanProcessor | None:
    """The budget processor ``instrument()`` added, if any."""
    return _state.processor if _state is not None else None


def traces_path() -> Path | None:
    """Where the local default writes spans, when it is in use."""
    return _state.traces_path if _state is not None else None


def _at_exit() -> None:
    if _state is not None:
        end_open_tasks()
    _lifecycle.keep_sigint_exit()  # our last exit hook before the provider's own


def _open_implicit_process_task() -> None:
    """The whole process as one task, unless something already is one or owns the context.

    Not under ``agent-latency run`` (its bootstrap opened the process task already), not off
    the main thread (the task is the main thread's context), and not while a span of this
    process is current (the program's own root span is the root of its work).  A remote
    parent — the ``TRACEPARENT`` of a process started by an instrumented one — is the
    process task's parent.
    """
    from . import _process
    from ._scope import in_task

    current = trace.get_current_span().get_span_context()
    if (_process.process_task.span is not None or not _process.on_main_thread()
            or in_task() or (current.is_valid and not current.is_remote)):
        return
    try:
        if FAULTS:
            fault("instrument.process_task")
        start_ns = _process.process_start_ns() or time.time_ns()
        _process.open_process_task(_process.process_name(), start_ns,
                                   {semconv.PROCESS_TASK: True})
    except Exception:  # noqa: BLE001 - the program runs on without its process task
        internal_error("instrument.process_task")


def _is_proxy(provider: object) -> bool:
    return type(provider).__name__.lstrip("_") in {"ProxyTracerProvider", "ProxyMeterProvider"}


def _meter_provider() -> metrics.MeterProvider:
    """The program's meter provider, or one we build when an OTLP endpoint is set."""
    provider = metrics.get_meter_provider()
    if not _is_proxy(provider):
        return provider
    exporter_names = _exporter_names("OTEL_METRICS_EXPORTER")
    if exporter_names is None:
        exporter_names = ["otlp"] if _otlp_endpoint_set("METRICS") else []
    readers = []
    for name in exporter_names:
        exporter = _metric_exporter(name)
        if exporter is not None:
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            readers.append(PeriodicExportingMetricReader(exporter,
                                                        **metric_reader_settings()))
    if not readers:
        # Nowhere to send metrics: leave the proxy, so a provider the program sets later
        # still receives our instruments.
        return provider
    from opentelemetry.sdk.metrics import MeterProvider

    built = MeterProvider(metric_readers=readers, resource=Resource.create())
    metrics.set_meter_provider(built)
    return built


def _build_tracer_provider() -> tuple[TracerProvider, bool, Path | None]:
    """A provider from the ``OTEL_*`` variables; ``True`` when it is the local default."""
    provider = TracerProvider(resource=Resource.create())
    names = _exporter_names("OTEL_TRACES_EXPORTER")
    local_default = names is None and not _otlp_endpoint_set("TRACES")
    if local_default:
        directory = Path(os.environ.get(semconv.ENV_OUTPUT_DIR, ".agent-latency"))
        path = directory / "traces.jsonl"
        provider.add_span_processor(BatchSpanProcessor(JsonLinesSpanExporter(path),
                                                       **batch_span_settings()))
        return provider, True, path
    for name in names or ["otlp"]:
        exporter = _span_exporter(name)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter, **batch_span_settings()))
    return provider, False, None


def _exporter_names(variable: str) -> list[str] | None:
    raw = os.environ.get(variable)
    if raw is None or not raw.strip():
        return None
    return [n.strip().lower() for n in raw.split(",") if n.strip() and n.strip() != "none"]


def _otlp_endpoint_set(signal: str) -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"))


def _protocol(signal: str) -> str:
    return (os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()


def _span_exporter(name: str) -> SpanExporter | None:
    if name == "otlp":
        if _protocol("TRACES") == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
        return OTLPSpanExporter()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "jsonl":
        directory = Path(os.environ.get(semconv.ENV_OUTPUT_DIR, ".agent-latency"))
        return JsonLinesSpanExporter(directory / "traces.jsonl")
    warn_once(f"exporter-{name}", "agent-latency: unknown OTEL_TRACES_EXPORTER %r ignored "
              "(known: otlp, console, jsonl, none)", name)
    return None


def _metric_exporter(name: str) -> Any:
    if name == "otlp":
        if _protocol("METRICS") == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
        return OTLPMetricExporter()
    if name == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    warn_once(f"metric-exporter-{name}", "agent-latency: unknown OTEL_METRICS_EXPORTER %r "
              "ignored (known: otlp, console, none)", name)
    return None
