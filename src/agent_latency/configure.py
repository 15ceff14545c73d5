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
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from . import _export_guard, _exporters, _hooks, _lifecycle, _process, semconv
from ._child_context import parent_context_from_env
from ._env import (
    batch_span_settings,
    env_flag,
    env_int,
    env_number,
    metric_reader_settings,
)
from ._export_guard import (
    DEFAULT_EXIT_TIMEOUT_S,
    counting_batch_processor,
    guard_metric_reader_exporter,
    report_failures,
    shut_down_within,
)
from ._import_times import IMPORTS, startup_attributes
from ._local import JsonLinesSpanExporter, TaskSummaryPrinter, default_traces_path
from ._log import Guard, logger, warn_once
from ._pauses import PAUSES
from ._scope import end_open_tasks, in_task
from .instrumentation import _all
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
# Providers instrument() built (shut down at exit by us, within the exit bound).
_built_providers: list[Any] = []
# The batch processors we added to each tracer provider we built.
_exporting: dict[Any, list[SpanProcessor]] = {}


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
        # The parts of tasks' other time: imports and garbage-collection pauses.
        IMPORTS.install()
        PAUSES.install()
        state = _State()
        provider: trace.TracerProvider | None = trace.get_tracer_provider()
        local_default = False
        if not hasattr(provider, "add_span_processor"):
            if _is_proxy(provider):
                provider, local_default, path = _build_tracer_provider()
                _built_providers.append(provider)
                state.owns_provider = True
                state.traces_path = path
            else:
                warn_once("foreign-provider", "agent-latency: the tracer provider %s is not the "
                          "OpenTelemetry SDK's; spans are made but no budget is computed",
                          type(provider).__name__)
                provider = None
        if provider is not None:
            state.tracer_provider = provider  # type: ignore[assignment]  # an SDK provider (add_span_processor)
            if meter_provider is None:
                meter_provider = _meter_provider()
            state.processor = BudgetSpanProcessor(
                meter_provider,
                max_open_tasks=env_int(semconv.ENV_MAX_OPEN_TASKS, 10_000, maximum=10**8),
                max_task_age=env_number(semconv.ENV_TASK_MAX_AGE, 24 * 3600.0,
                                        maximum=10 * 366 * 24 * 3600.0),
                task_names=_metric_task_names(),
            )
            # Budget first: its on_end must run before exporters' in the same provider.
            _add_span_processor(provider, state.processor)
            if env_flag(semconv.ENV_SUMMARY, local_default if summary is None else summary):
                state.summary = TaskSummaryPrinter()
                _add_span_processor(provider, state.summary)
            if state.owns_provider:
                trace.set_tracer_provider(provider)
        _hooks.export_control = (stop_exports, restart_exports)
        state.instrumentors = _all.instrument_all(targets)
        _state = state
        _export_guard.exit_timeout_s = env_number(semconv.ENV_EXIT_TIMEOUT,
                                                  DEFAULT_EXIT_TIMEOUT_S, maximum=3600.0)
        _lifecycle.install(_at_exit, _own_batches)
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
    _hooks.export_control = None
    _all.cancel_pending()
    process_task = _process.process_task
    if process_task.is_open and process_task.implicit:
        process_task.end()  # with its budget, while the processor still computes them
    for instrumentor in state.instrumentors:
        try:
            instrumentor.uninstrument()
        except Exception:  # noqa: BLE001
            logger.debug("agent-latency: uninstrumenting %r failed", instrumentor, exc_info=True)
    IMPORTS.uninstall()
    if state.processor is not None:
        state.processor.shutdown()
    if state.summary is not None:
        state.summary.shutdown()
    if state.owns_provider and state.tracer_provider is not None:
        state.tracer_provider.force_flush()


def traces_path() -> Path | None:
    """Where the local default writes spans, when it is in use."""
    return _state.traces_path if _state is not None else None


def _at_exit() -> None:
    """Ends open tasks, then shuts down the providers we built within the exit bound."""
    _hooks.run_later()  # calls a last collection put off (streams dropped unfinished)
    if _state is not None:
        end_open_tasks()
    if _built_providers:  # how many spans a full export queue dropped, for the report
        _export_guard.say_losses(_built_providers[0].get_tracer("agent_latency"))
    # Providers we built stay global after uninstrument(): they are flushed here either way.
    shut_down_within(_built_providers, _export_guard.exit_timeout_s)
    report_failures()
    _lifecycle.keep_sigint_exit()  # our last exit hook before the provider's own


def _add_span_processor(provider: Any, processor: SpanProcessor) -> None:
    """Adds ``processor`` beside every processor ``provider`` already has.

    Some vendors' providers replace their own exporting processor on the first
    ``add_span_processor`` unless told not to (Phoenix's ``register()`` does, with
    ``replace_default_processor``): that would silently stop the host's export.
    """
    # inspect is start-up time: only for a provider of the program's own.
    import inspect

    parameters: Mapping[str, inspect.Parameter]
    try:
        parameters = inspect.signature(provider.add_span_processor).parameters
    except (TypeError, ValueError):
        parameters = {}
    if "replace_default_processor" in parameters:
        provider.add_span_processor(processor, replace_default_processor=False)
    else:
        provider.add_span_processor(processor)


@Guard("instrument.process_task")
def _open_implicit_process_task() -> None:
    """The whole process as one task, unless something already is one or owns the context.

    Not under ``agent-latency run`` (its bootstrap opened the process task already), not off
    the main thread (the task is the main thread's context), and not while a span of this
    process is current (the program's own root span is the root of its work).  A remote
    parent — the ``TRACEPARENT`` of a process started by an instrumented one — is the
    process task's parent.
    """
    current = trace.get_current_span().get_span_context()
    if (_process.process_task.span is not None or not _process.on_main_thread()
            or in_task() or (current.is_valid and not current.is_remote)):
        return
    # A child of a traced process starts inside its parent's tool span: the kernel's
    # start time is taken at its latest, so the child's task does not begin before it.
    child = parent_context_from_env() is not None
    start_ns = _process.process_start_ns(latest=child) or time.time_ns()
    _process.open_process_task(_process.process_name(), start_ns,
                               {semconv.PROCESS_TASK: True, **startup_attributes(start_ns)})


def _metric_task_names() -> int:
    """How many task names the wall-time metric may label: 0 unless
    ``AGENT_LATENCY_METRIC_TASK_NAMES`` is on, then ``…_LIMIT`` (default 100)."""
    if not env_flag(semconv.ENV_METRIC_TASK_NAMES, False):
        return 0
    return env_int(semconv.ENV_METRIC_TASK_NAMES_LIMIT, semconv.DEFAULT_METRIC_TASK_NAMES_LIMIT,
                   maximum=100_000)


def _is_proxy(provider: object) -> bool:
    return type(provider).__name__.lstrip("_") in {"ProxyTracerProvider", "ProxyMeterProvider"}


def _meter_provider() -> metrics.MeterProvider:
    """The program's meter provider, or one we build from ``OTEL_METRICS_EXPORTER`` (by
    default OTLP when an endpoint is set)."""
    provider = metrics.get_meter_provider()
    if not _is_proxy(provider):
        return provider
    names = _exporters.exporter_names("OTEL_METRICS_EXPORTER")
    if names is None:
        names = ["otlp"] if _exporters.otlp_endpoint_set("METRICS") else []
    readers = _exporters.metric_readers(names, guard=guard_metric_reader_exporter,
                                        settings=metric_reader_settings())
    if not readers:
        # Nowhere to send metrics: leave the proxy, so a provider the program sets later
        # still receives our instruments.
        return provider
    # The SDK's metrics package: start-up time a program without metrics never needs.
    from opentelemetry.sdk.metrics import MeterProvider

    # Shut down by our exit hook, within its bound, not by the SDK's unbounded one.
    built = MeterProvider(metric_readers=readers, resource=Resource.create(),
                          shutdown_on_exit=False)
    metrics.set_meter_provider(built)
    _built_providers.append(built)
    return built


def _build_tracer_provider() -> tuple[TracerProvider, bool, Path | None]:
    """A provider from the ``OTEL_*`` variables; ``True`` when it is the local default.

    No exporter variable and no OTLP endpoint: the local default (the JSON-lines file).
    ``OTEL_TRACES_EXPORTER`` unset with an endpoint: OTLP.  Otherwise the exporters it
    names, ``none`` meaning none at all (budgets are still computed and printed if asked).
    """
    # Shut down by our exit hook, within its bound, not by the SDK's unbounded one.
    provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
    processors, local_default, path = _exporting_processors()
    for processor in processors:
        provider.add_span_processor(processor)
    _exporting[provider] = processors
    return provider, local_default, path


#: ``service.name`` when the environment names none (``agent-latency run`` sets it to the
#: run's name before it calls ``instrument()``).
default_service_name: str | None = None


def _resource() -> Resource:
    """The SDK's resource from the ``OTEL_*`` variables; when they name no service,
    :data:`default_service_name` rather than ``unknown_service:python``.

    Precedence: ``OTEL_SERVICE_NAME``, then ``service.name`` in
    ``OTEL_RESOURCE_ATTRIBUTES``, then the default given here."""
    # Only when a provider is built here.
    from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector

    resource = Resource.create()
    if default_service_name and SERVICE_NAME not in OTELResourceDetector().detect().attributes:
        resource = resource.merge(Resource({SERVICE_NAME: default_service_name}))
    return resource


def _exporting_processors() -> tuple[list[SpanProcessor], bool, Path | None]:
    """The batch processors (with their exporters) the ``OTEL_*`` variables ask for, whether
    that is the local default, and the local file's path if one is written."""
    names = _exporters.exporter_names("OTEL_TRACES_EXPORTER")
    path: Path | None
    if names is None and not _exporters.otlp_endpoint_set("TRACES"):
        path = default_traces_path()  # absolute now: a later chdir does not move it
        return [counting_batch_processor(JsonLinesSpanExporter(path),
                                         **batch_span_settings())], True, path
    path = None
    processors: list[SpanProcessor] = []
    for exporter in _exporters.span_exporters(["otlp"] if names is None else names):
        if isinstance(exporter, JsonLinesSpanExporter):
            path = exporter.path
        processors.append(counting_batch_processor(exporter, **batch_span_settings()))
    return processors, False, path


def _own_batches() -> list[Any]:
    """The SDK batch processors of the exports built here (their threads stop for a fork)."""
    # Only when a fork or gevent's late patch needs the threads.
    from ._sdk import batch_of

    return [batch for processors in _exporting.values() for processor in processors
            if (batch := batch_of(processor)) is not None]


def stop_exports() -> None:
    """Flush and stop the export threads of the providers we built, and take their batch
    processors out (spans ended until :func:`restart_exports` are not exported).

    For gevent's ``monkey.patch_all()`` after ``instrument()``: threads started before it
    are real threads that gevent does not know, and the SDK restarts them in a forked child
    before gevent's own fork hook runs, which then leaves the parent's greenlets running in
    the child (a process started from a greenlet hangs).  Processors made after the patch
    start gevent threads, with their fork hooks after gevent's.
    """
    # Only under gevent's late patch.
    from ._sdk import remove_span_processors

    for provider, processors in _exporting.items():
        for processor in processors:
            try:
                processor.shutdown()
            except Exception:  # noqa: BLE001 - the next one is still stopped
                logger.debug("agent-latency: stopping %r failed", processor, exc_info=True)
        if remove_span_processors(provider, processors):
            processors.clear()


def restart_exports() -> None:
    """New batch processors and exporters for the providers :func:`stop_exports` stopped."""
    for provider, processors in _exporting.items():
        if processors:
            continue  # never stopped (an SDK whose processors could not be taken out)
        fresh, _, _ = _exporting_processors()
        for processor in fresh:
            provider.add_span_processor(processor)
        processors.extend(fresh)
