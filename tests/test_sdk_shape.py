"""The OpenTelemetry SDK private fields agent_latency reads: their shape, their fallback, their
one home (``agent_latency/_sdk.py``).

When a new SDK release moves a field, ``TestInstalledSdkShape`` fails naming it: fix
``_sdk.py`` (or keep the pin) before widening ``opentelemetry-sdk`` in pyproject.toml.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import Counter
from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricExporter
from opentelemetry.sdk.metrics.view import LastValueAggregation
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind

import agent_latency
from agent_latency import _sdk, processor, semconv
from agent_latency.budget import COMPONENTS

SRC = Path(agent_latency.__file__).resolve().parent

# Private names of the OpenTelemetry API/SDK that only _sdk.py may read.
SDK_PRIVATE_NAMES = frozenset({
    *_sdk.SPAN_FIELDS.values(), "_attributes", "_dict", "_events", "_links", "_status",
    "_resource", "_instrumentation_scope", "_endpoint", "_preferred_temporality",
    "_preferred_aggregation", "_active_span_processor", "_span_processors",
    "_batch_processor", "_worker_thread",
    "_SUPPRESS_INSTRUMENTATION_KEY", "_SUPPRESS_HTTP_INSTRUMENTATION_KEY",
})
# Objects of our own classes whose private fields share a name with the SDK's.
OWN_OBJECTS = frozenset({"self", "cls", "fresh"})


def private_sdk_reads(root: Path, skip: frozenset[str] = frozenset({"_sdk.py"})) -> list[str]:
    """``file:line name`` of every read of an SDK private name under ``root``.

    Counts ``obj._field`` (obj not one of ours), ``getattr(obj, "_field", ...)`` and
    ``from opentelemetry... import _NAME``.
    """
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name in skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = None
            if isinstance(node, ast.Attribute) and node.attr in SDK_PRIVATE_NAMES:
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id in OWN_OBJECTS):
                    name = node.attr
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant)
                  and node.args[1].value in SDK_PRIVATE_NAMES):
                name = node.args[1].value
            elif (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "opentelemetry")):
                private = [a.name for a in node.names if a.name.startswith("_")]
                name = ",".join(private) or None
            if name:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {name}")
    return found


def real_span(provider: TracerProvider, **kwargs) -> tuple[object, object]:
    tracer = provider.get_tracer("shape")
    parent = tracer.start_span("parent")
    from opentelemetry import trace

    span = tracer.start_span("child", context=trace.set_span_in_context(parent),
                             kind=SpanKind.CLIENT, attributes={"k": "v"}, **kwargs)
    return parent, span


def load_sdk_module_with(monkeypatch, reshaped_span: type) -> object:
    """A fresh copy of ``_sdk.py`` imported while the SDK's ``ReadableSpan`` is reshaped."""
    import opentelemetry.sdk.trace as sdk_trace

    monkeypatch.setattr(sdk_trace, "ReadableSpan", reshaped_span)
    spec = importlib.util.spec_from_file_location("agent_latency._sdk_reshaped", _sdk.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sdk_trace, "ReadableSpan", ReadableSpan)
    return module


class _ParentRenamed(ReadableSpan):
    """An SDK release that renamed ``_parent`` (the shape check must notice)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._parent_context = self.__dict__.pop("_parent")

    @property
    def parent(self):
        return self._parent_context


class TestInstalledSdkShape:
    """The installed SDK keeps its fields where _sdk.py reads them; loudly when not."""

    def test_probe_finds_the_expected_shape(self):
        from importlib.metadata import version

        assert _sdk.SHAPE_PROBLEM is None, (
            f"opentelemetry-sdk {version('opentelemetry-sdk')} changed shape: "
            f"{_sdk.SHAPE_PROBLEM}. Update agent_latency/_sdk.py, or keep the pin.")
        assert _sdk.PRIVATE_FIELDS is True

    def test_each_accessor_is_the_public_property_on_real_spans(self):
        provider = TracerProvider(shutdown_on_exit=False)
        parent, span = real_span(provider)
        for when in ("open", "ended"):
            for public, private in _sdk.SPAN_FIELDS.items():
                assert private in vars(span), f"SDK Span has no {private} (for .{public})"
                assert getattr(span, private) is getattr(span, public), f"{private} ({when})"
            assert _sdk.span_parent(span) is span.parent
            assert _sdk.span_parent(span).span_id == parent.get_span_context().span_id
            assert _sdk.span_id(span) == span.get_span_context().span_id
            assert _sdk.span_kind(span) is SpanKind.CLIENT
            assert _sdk.span_name(span) == "child"
            assert _sdk.start_ns(span) == span.start_time
            assert _sdk.end_ns(span) == span.end_time
            assert _sdk.span_times(span) == (span.start_time, span.end_time)
            assert dict(_sdk.attributes_of(span)) == dict(span.attributes) == {"k": "v"}
            span.end()
        assert _sdk.end_ns(span) is not None

    def test_attribute_store_write_reaches_an_ended_span(self):
        provider = TracerProvider(shutdown_on_exit=False)
        _, span = real_span(provider)
        span.end()
        span.set_attribute("late", 1)  # the public API ignores it: the span has ended
        assert "late" not in span.attributes
        store = _sdk.attribute_store(span)
        assert type(store) is dict, "BoundedAttributes no longer keeps a plain _dict"
        store["late"] = 2
        assert span.attributes["late"] == 2

    def test_event_and_link_attributes_are_bounded_with_a_dict(self):
        provider = TracerProvider(shutdown_on_exit=False)
        _, span = real_span(provider)
        span.add_event("e", {"a": 1})
        span.end()
        inner = _sdk.bounded_dict(span.events[0].attributes)
        assert inner == {"a": 1}

    def test_exporter_fields_the_guards_read(self):
        pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint="http://127.0.0.1:4318/v1/traces")
        assert _sdk.exporter_endpoint(exporter) == "http://127.0.0.1:4318/v1/traces"
        exporter.shutdown()

        class Pushing(MetricExporter):
            def export(self, metrics_data, timeout_millis=10_000, **kwargs):
                return None

            def force_flush(self, timeout_millis=10_000):
                return True

            def shutdown(self, timeout_millis=30_000, **kwargs):
                return None

        temporality = {Counter: AggregationTemporality.DELTA}
        aggregation = {Counter: LastValueAggregation()}
        metric_exporter = Pushing(preferred_temporality=temporality,
                                  preferred_aggregation=aggregation)
        assert _sdk.preferred_temporality(metric_exporter) is temporality
        assert _sdk.preferred_aggregation(metric_exporter) is aggregation


class TestPublicFallback:
    """On an SDK of another shape the accessors read the public API, and tasks still work."""

    def test_reshaped_sdk_is_detected_and_public_accessors_chosen(self, monkeypatch):
        reshaped = load_sdk_module_with(monkeypatch, _ParentRenamed)
        assert reshaped.PRIVATE_FIELDS is False
        assert "_parent" in reshaped.SHAPE_PROBLEM
        provider = TracerProvider(shutdown_on_exit=False)
        _, span = real_span(provider)
        span.end()
        assert reshaped.span_parent(span) is span.parent
        assert reshaped.span_id(span) == span.context.span_id
        assert reshaped.start_ns(span) == span.start_time
        assert reshaped.end_ns(span) == span.end_time
        assert reshaped.span_times(span) == (span.start_time, span.end_time)
        assert reshaped.span_kind(span) is span.kind
        assert reshaped.span_name(span) == span.name
        assert dict(reshaped.attributes_of(span)) == {"k": "v"}
        assert reshaped.attribute_store(span) is None
        assert reshaped.bounded_dict(span.attributes) is None

    def test_budget_processor_on_public_accessors(self, monkeypatch, otel):
        reshaped = load_sdk_module_with(monkeypatch, _ParentRenamed)
        for name in ("span_id", "span_parent", "span_kind", "span_name", "start_ns", "end_ns",
                     "span_times", "attributes_of", "attribute_store"):
            monkeypatch.setattr(processor, "_" + name, getattr(reshaped, name))
        with agent_latency.task("fallback"):
            with agent_latency.tool("t"):
                time.sleep(0.02)
        span = otel.span("invoke_agent fallback")
        shares = {c: span.attributes[semconv.budget_share(c)] for c in COMPONENTS}
        assert shares["tool_execution"] >= 0.015
        assert span.attributes[semconv.BUDGET_WALL] == pytest.approx(sum(shares.values()),
                                                                     abs=1e-3)


class TestOneModule:
    """No module but _sdk.py reads an SDK private name (a new one fails here, by line)."""

    def test_no_private_sdk_reads_outside_sdk_module(self):
        reads = private_sdk_reads(SRC)
        assert reads == [], "private SDK reads outside _sdk.py:\n" + "\n".join(reads)

    def test_the_scan_sees_them(self):
        # The scanner itself: _sdk.py's own reads are found when it is not skipped.
        reads = private_sdk_reads(SRC, skip=frozenset())
        assert any(r.startswith(f"{SRC.name}/_sdk.py:") and r.endswith(" _dict") for r in reads)
        assert sys.modules["agent_latency._sdk"] is _sdk
