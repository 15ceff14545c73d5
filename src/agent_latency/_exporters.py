"""Exporters chosen the way OpenTelemetry chooses them: by name, through entry points.

``OTEL_TRACES_EXPORTER`` and ``OTEL_METRICS_EXPORTER`` name entries of the
``opentelemetry_traces_exporter`` / ``opentelemetry_metrics_exporter`` groups, as the SDK's
own configurator reads them, so every exporter a user installs works by its name (``otlp``,
``console``, ``zipkin_json``, ``prometheus``, a vendor's) and ours, ``jsonl``, works under
``opentelemetry-instrument`` too.  ``none`` (or a list with nothing else) means no exporter.

Two differences from the SDK's configurator, on purpose: ``otlp`` with no protocol set means
``http/protobuf``, the protocol the OTLP specification makes the default (the configurator
picks gRPC); and OTLP metrics are sent with delta temporality unless
``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`` says otherwise.  An agent often lives
one process per task: a cumulative series per process shows Prometheus its final value as its
first sample, which ``rate()`` cannot see, while deltas from every process add up in the
Collector (``deltatocumulative``) into one series per label set (docs/production.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

from ._local import JsonLinesSpanExporter, default_traces_path
from ._log import logger, warn_once

TRACES_GROUP = "opentelemetry_traces_exporter"
METRICS_GROUP = "opentelemetry_metrics_exporter"
TEMPORALITY_VARIABLE = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http",
                     "http/json": "otlp_proto_http"}


def exporter_names(variable: str) -> list[str] | None:
    """The names in ``variable``, ``None`` when it is unset or blank; ``none`` entries are
    dropped, so ``none`` alone (or ``,``) gives an empty list: no exporter at all."""
    raw = os.environ.get(variable)
    if raw is None or not raw.strip():
        return None
    return [n for n in (part.strip().lower() for part in raw.split(","))
            if n and n != "none"]


def otlp_endpoint_set(signal: str) -> bool:
    """Whether ``OTEL_EXPORTER_OTLP_ENDPOINT`` or the signal's own endpoint is set."""
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
                or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "").strip())


def span_exporters(names: list[str]) -> list[SpanExporter]:
    """One exporter per name; a name no installed package provides is warned about once
    and skipped."""
    exporters = []
    for name in names:
        exporter = _load(TRACES_GROUP, _entry_name(name, "TRACES"), "OTEL_TRACES_EXPORTER")
        if exporter is not None:
            exporters.append(exporter)
    return exporters


def metric_readers(names: list[str],
                   guard: Callable[[Any], Any] = lambda exporter: exporter,
                   settings: dict[str, Any] | None = None) -> list[Any]:
    """One reader per name: pull exporters (``prometheus``) are readers themselves, push
    exporters (passed through ``guard`` first) are read every
    ``OTEL_METRIC_EXPORT_INTERVAL`` by a periodic reader (``settings``: its validated
    interval and timeout)."""
    if not names:
        return []  # without importing the SDK's metrics package: start-up time
    # The SDK's metrics package: start-up time a program without metrics never needs.
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader

    readers = []
    for name in names:
        entry = _entry_name(name, "METRICS")
        made = _load(METRICS_GROUP, entry, "OTEL_METRICS_EXPORTER",
                     **_otlp_metrics_options(entry))
        if made is None:
            continue
        readers.append(made if isinstance(made, MetricReader)
                       else PeriodicExportingMetricReader(guard(made), **(settings or {})))
    return readers


def _entry_name(name: str, signal: str) -> str:
    if name != "otlp":
        return name
    protocol = (os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "").strip()
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or "http/protobuf")
    entry = _OTLP_BY_PROTOCOL.get(protocol.lower())
    if entry is None:
        warn_once(f"otlp-protocol-{protocol}", "agent-latency: OTLP protocol %r is not one of "
                  "grpc, http/protobuf; using http/protobuf", protocol)
        return "otlp_proto_http"
    return entry


def _otlp_metrics_options(entry: str) -> dict[str, Any]:
    """Delta temporality for an OTLP metrics exporter, unless the user chose one
    (``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE``, which the exporter reads)."""
    if not entry.startswith("otlp") or os.environ.get(TEMPORALITY_VARIABLE, "").strip():
        return {}
    # The SDK's metrics modules load only where an OTLP metrics exporter is built.
    from opentelemetry.sdk.metrics import Counter, Histogram, ObservableCounter
    from opentelemetry.sdk.metrics.export import AggregationTemporality

    # What the variable's ``delta`` gives: monotonic counters and histograms as deltas;
    # up-down counters and gauges stay cumulative (a delta of those adds up to nothing).
    delta = AggregationTemporality.DELTA
    return {"preferred_temporality": {Counter: delta, ObservableCounter: delta,
                                      Histogram: delta}}


def _load(group: str, name: str, variable: str, **options: Any) -> Any:
    """An instance of the entry point ``name`` of ``group`` (made with ``options``), or
    None with one warning."""
    # Imported here: scanning installed packages' metadata is start-up time the local
    # default (which names no exporter) never needs.
    from importlib.metadata import entry_points

    found = {ep.name: ep for ep in entry_points(group=group)}
    entry = found.get(name)
    if entry is None:
        choices = ", ".join(sorted({*found, "none"}))
        warn_once(f"exporter-{group}-{name}", "agent-latency: %s names %r, which no installed "
                  "package provides (installed: %s); ignored", variable, name, choices)
        return None
    try:
        return entry.load()(**options)
    except Exception as exc:  # noqa: BLE001 - a broken exporter must not stop the program
        warn_once(f"exporter-{group}-{name}-failed", "agent-latency: the %s exporter %r could "
                  "not be made (%s: %s); ignored", variable, name, type(exc).__name__, exc)
        logger.debug("exporter %s failed", name, exc_info=True)
        return None


class LocalJsonLinesExporter(JsonLinesSpanExporter):
    """``OTEL_TRACES_EXPORTER=jsonl``: the local file (``default_traces_path()``) as an
    exporter any OpenTelemetry configurator can make by name."""

    def __init__(self) -> None:
        super().__init__(default_traces_path())
