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
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.metrics import Counter
from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricExporter
from opentelemetry.sdk.metrics.view import LastValueAggregation
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
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
    "_batch_processor", "_worker_thread", "_measurement_consumer", "_meter_config",
    "_root", "_remote_parent_sampled", "_local_parent_sampled",
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


def _exported(provider: TracerProvider) -> tuple[object, list]:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, exporter.get_finished_spans


class _Calls(SpanProcessor):
    """Counts what a processor is handed."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[str] = []

    def on_start(self, span, parent_context=None) -> None:
        self.started.append(span.name)

    def on_end(self, span) -> None:
        self.ended.append(span.name)

    def shutdown(self) -> None: ...

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class TestPlainAttributes:
    """set_plain_attributes stores exactly what set_attributes would, or goes through it."""

    ATTRS: ClassVar[dict[str, object]] = {"s": "x", "b": True, "i": 3, "f": 0.25,
                                          "t": ("stop", "length"), "e": ()}

    def both(self, attrs, **limits) -> tuple[dict, dict]:
        from opentelemetry.sdk.trace import SpanLimits

        provider = TracerProvider(span_limits=SpanLimits(**limits))
        tracer = provider.get_tracer("shape")
        fast, slow = tracer.start_span("fast"), tracer.start_span("slow")
        _sdk.set_plain_attributes(fast, dict(attrs))
        slow.set_attributes(dict(attrs))
        fast.end()
        slow.end()
        return dict(fast.attributes), dict(slow.attributes)

    def test_same_as_the_sdk_on_plain_values(self):
        fast, slow = self.both(self.ATTRS)
        assert fast == slow == self.ATTRS

    @pytest.mark.parametrize("value", [["a", "b"], ("a", 1), (1.5, None), object(), None,
                                       SpanKind.CLIENT])
    def test_anything_else_goes_through_the_sdk(self, value):
        fast, slow = self.both({"k": value, "n": 1})
        assert fast == slow

    @pytest.mark.parametrize("limits", [{"max_span_attributes": 3},
                                        {"max_span_attribute_length": 2}])
    def test_limits_act_as_they_would(self, limits):
        fast, slow = self.both({"a": "long", "b": "longer", "c": 1, "d": 2.0}, **limits)
        assert fast == slow
        assert len(fast) < 4 or fast["a"] == "lo"

    def test_the_fast_path_is_taken_where_it_can(self, monkeypatch):
        span = TracerProvider().get_tracer("shape").start_span("s")
        monkeypatch.setattr(type(span), "set_attributes",
                            lambda *a: pytest.fail("went through the SDK"))
        _sdk.set_plain_attributes(span, dict(self.ATTRS))
        assert dict(span.attributes) == self.ATTRS

    def test_sequences_apart_are_stored_as_the_sdk_stores_them(self, monkeypatch):
        scalars = {k: v for k, v in self.ATTRS.items() if type(v) is not tuple}
        sequences = {k: v for k, v in self.ATTRS.items() if type(v) is tuple}
        span = TracerProvider().get_tracer("shape").start_span("s")
        monkeypatch.setattr(type(span), "set_attributes",
                            lambda *a: pytest.fail("went through the SDK"))
        _sdk.set_plain_attributes(span, dict(scalars), dict(sequences))
        assert dict(span.attributes) == self.ATTRS

    @pytest.mark.parametrize("sequence", [["a", "b"], ("a", 1), (None,)])
    def test_a_sequence_the_sdk_would_change_goes_through_it(self, sequence):
        provider = TracerProvider()
        fast, slow = (provider.get_tracer("shape").start_span(n) for n in ("fast", "slow"))
        _sdk.set_plain_attributes(fast, {"n": 1}, {"k": sequence})
        slow.set_attributes({"n": 1, "k": sequence})
        assert dict(fast.attributes) == dict(slow.attributes)

    def test_an_ended_span_is_left_as_the_sdk_leaves_it(self):
        span = TracerProvider().get_tracer("shape").start_span("s")
        span.end()
        _sdk.set_plain_attributes(span, {"late": 1})
        assert "late" not in span.attributes


class TestFinishedChildren:
    """emit_finished_children: the spans start_span + end would export, handed over ended."""

    def test_same_spans_as_through_the_tracer(self):
        from opentelemetry import trace

        provider = TracerProvider()
        calls = _Calls()
        provider.add_span_processor(calls)
        exporter, finished = _exported(provider)
        tracer = provider.get_tracer("agent_latency", "9.9")
        parent = tracer.start_span("chat m", kind=SpanKind.CLIENT)
        attrs = {"openinference.span.kind": "CHAIN"}
        tiles = [("network", 1_000, 2_000), ("prefill", 2_000, 5_000)]
        assert _sdk.emit_finished_children(tracer, parent, tiles,
                                           _sdk.frozen_attributes(attrs))
        context = trace.set_span_in_context(parent)
        for name, start, end in tiles:
            tracer.start_span(name, context=context, start_time=start,
                              attributes=attrs).end(end_time=end)
        parent.end()
        spans = finished()
        fast, slow = spans[:2], spans[2:4]
        for ours, theirs in zip(fast, slow, strict=True):
            for field in ("name", "kind", "parent", "start_time", "end_time", "resource",
                          "instrumentation_scope", "status", "events", "links"):
                assert getattr(ours, field) == getattr(theirs, field), field
            assert dict(ours.attributes) == dict(theirs.attributes) == attrs
            assert ours.context.trace_id == theirs.context.trace_id == parent.context.trace_id
            assert ours.context.trace_flags == theirs.context.trace_flags
            assert ours.context.span_id not in (theirs.context.span_id,
                                                parent.context.span_id)
            assert ours.dropped_attributes == 0
        assert len({s.context.span_id for s in spans}) == 5
        # Handed over ended: the processors see them in on_end only.
        assert calls.started == ["chat m", "network", "prefill"]
        assert calls.ended == ["network", "prefill", "network", "prefill", "chat m"]
        exporter.shutdown()

    def test_nothing_done_where_the_tracer_cannot(self):
        from opentelemetry.trace import NonRecordingSpan, ProxyTracer, SpanContext, TraceFlags

        provider = TracerProvider()
        calls = _Calls()
        provider.add_span_processor(calls)
        tracer = provider.get_tracer("shape")
        tiles = [("prefill", 1, 2)]
        unsampled = NonRecordingSpan(SpanContext(1, 2, False, TraceFlags(0)))
        assert not _sdk.emit_finished_children(tracer, unsampled, tiles, {})
        assert not _sdk.emit_finished_children(ProxyTracer("x"), tracer.start_span("p"),
                                               tiles, {})
        assert calls.ended == []


class TestFinishedChildContexts:
    """A finished child's context is the one SpanContext's constructor builds, whatever the
    provider's id generator."""

    @pytest.mark.parametrize("ids", ["random", "custom"])
    def test_context_as_constructed(self, ids):
        from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
        from opentelemetry.trace import SpanContext

        class Counting(IdGenerator):
            def __init__(self) -> None:
                self.next = 40

            def generate_span_id(self) -> int:
                self.next += 1
                return self.next

            def generate_trace_id(self) -> int:
                return 7

        provider = TracerProvider(
            id_generator=RandomIdGenerator() if ids == "random" else Counting())
        exporter, finished = _exported(provider)
        tracer = provider.get_tracer("agent_latency")
        parent = tracer.start_span("chat m")
        assert _sdk.emit_finished_children(tracer, parent, [("prefill", 1, 2)],
                                           _sdk.frozen_attributes({}))
        parent.end()
        child = finished()[0].context
        assert type(child) is SpanContext
        assert child == SpanContext(child.trace_id, child.span_id, False,
                                    parent.context.trace_flags, parent.context.trace_state)
        assert child.is_valid and child.span_id != parent.context.span_id
        if ids == "custom":
            assert child.span_id == 42
        exporter.shutdown()


class _ReadsAttributes:
    """A sampler of the program's own that samples on a request attribute."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None,
                      links=None, trace_state=None):
        from opentelemetry.sdk.trace.sampling import Decision, SamplingResult

        self.seen.append(dict(attributes or {}))
        keep = (attributes or {}).get("gen_ai.request.model") == "kept"
        return SamplingResult(Decision.RECORD_AND_SAMPLE if keep else Decision.DROP,
                              attributes)

    def get_description(self) -> str:
        return "reads attributes"


class TestStartSpan:
    """start_span: the span tracer.start_span makes with the attributes, however it starts."""

    ATTRS: ClassVar[dict[str, object]] = {"gen_ai.operation.name": "chat",
                                          "gen_ai.request.model": "kept",
                                          "server.port": 8000, "gen_ai.request.stream": False,
                                          "gen_ai.request.temperature": 0.25}

    def started(self, sampler=None, attrs=None) -> tuple[Any, Any, _StartAttributes]:
        provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
        calls = _StartAttributes()
        provider.add_span_processor(calls)
        tracer = provider.get_tracer("agent_latency")
        attrs = dict(self.ATTRS if attrs is None else attrs)
        ours = _sdk.start_span(tracer, "chat kept", SpanKind.CLIENT, attrs, 1_000)
        theirs = tracer.start_span("chat kept", kind=SpanKind.CLIENT, attributes=attrs,
                                   start_time=1_000)
        ours.end(end_time=2_000)
        theirs.end(end_time=2_000)
        return ours, theirs, calls

    def test_same_span_as_the_sdk_starts(self):
        ours, theirs, calls = self.started()
        for field in ("name", "kind", "parent", "start_time", "end_time", "resource",
                      "instrumentation_scope", "status"):
            assert getattr(ours, field) == getattr(theirs, field), field
        assert dict(ours.attributes) == dict(theirs.attributes) == self.ATTRS
        assert ours.context.trace_flags == theirs.context.trace_flags
        # The SDK's default sampler reads no attribute: ours started without them.
        assert calls.at_start == [{}, self.ATTRS]
        assert calls.at_end == [self.ATTRS, self.ATTRS]

    @pytest.mark.parametrize("value", [["a", "b"], object(), SpanKind.CLIENT])
    def test_values_the_sdk_would_change_go_through_it(self, value):
        ours, theirs, _ = self.started(attrs={"k": value, "n": 1})
        assert dict(ours.attributes) == dict(theirs.attributes)

    def test_a_sampler_that_reads_attributes_gets_them(self):
        sampler = _ReadsAttributes()
        ours, theirs, calls = self.started(sampler=sampler)
        assert sampler.seen == [self.ATTRS, self.ATTRS]
        assert ours.context.trace_flags.sampled
        assert dict(ours.attributes) == dict(theirs.attributes) == self.ATTRS
        assert calls.at_start == [self.ATTRS, self.ATTRS]
        dropped, _, _ = self.started(sampler=sampler,
                                     attrs={**self.ATTRS, "gen_ai.request.model": "other"})
        assert not dropped.get_span_context().trace_flags.sampled

    def test_an_unsampled_span_is_the_sdks(self):
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

        ours, theirs, calls = self.started(sampler=ALWAYS_OFF)
        assert type(ours) is type(theirs)
        assert not ours.is_recording() and calls.at_end == []

    def test_the_sdks_samplers_are_blind_to_attributes(self):
        from opentelemetry.sdk.trace import sampling

        for sampler in (sampling.ALWAYS_ON, sampling.ALWAYS_OFF, sampling.DEFAULT_ON,
                        sampling.DEFAULT_OFF, sampling.TraceIdRatioBased(0.5),
                        sampling.ParentBasedTraceIdRatio(0.5),
                        sampling.ParentBased(sampling.ALWAYS_ON,
                                             remote_parent_sampled=sampling.ALWAYS_OFF),
                        sampling.AlwaysRecordSampler(sampling.ALWAYS_OFF)):
            assert _sdk.attribute_blind(sampler), sampler.get_description()

    def test_any_other_sampler_is_not(self):
        from opentelemetry.sdk.trace import sampling

        class Ratio(sampling.TraceIdRatioBased):
            """A subclass may read attributes in its should_sample."""

        reads = _ReadsAttributes()
        for sampler in (reads, Ratio(0.5), sampling.ParentBased(reads),
                        sampling.ParentBased(sampling.ALWAYS_ON, local_parent_sampled=reads),
                        sampling.AlwaysRecordSampler(reads), None):
            assert not _sdk.attribute_blind(sampler)


class _StartAttributes(SpanProcessor):
    """The attributes a processor sees at each span's start and end."""

    def __init__(self) -> None:
        self.at_start: list[dict] = []
        self.at_end: list[dict] = []

    def on_start(self, span, parent_context=None) -> None:
        self.at_start.append(dict(span.attributes))

    def on_end(self, span) -> None:
        self.at_end.append(dict(span.attributes))

    def shutdown(self) -> None: ...

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class TestPlainRecorder:
    """plain_recorder: the measurements histogram.record makes, without its validation."""

    def points(self, record_with) -> list[tuple]:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader])
        histogram = provider.get_meter("agent_latency").create_histogram(
            "h", unit="s", explicit_bucket_boundaries_advisory=[0.1, 1.0, 10.0])
        record = record_with(histogram)
        for amount, attributes in ((0.5, {"op": "chat", "port": 8000}),
                                   (3.0, {"op": "chat", "port": 8000}),
                                   (2, {"op": "chat", "stream": False, "t": 0.25}),
                                   (0.0, {}),
                                   (float("nan"), {"op": "chat"}),
                                   (-1.0, {"op": "chat"}),
                                   (1.0, {"op": ["a", "b"]}),
                                   (1.0, {"op": SpanKind.CLIENT})):
            record(amount, attributes)
        data = reader.get_metrics_data()
        provider.shutdown()
        metric = data.resource_metrics[0].scope_metrics[0].metrics[0]
        return sorted(((tuple(sorted(p.attributes.items(), key=str)), p.count, p.sum,
                        tuple(p.bucket_counts), p.min, p.max)
                       for p in metric.data.data_points), key=repr)

    def test_same_points_as_the_sdks_record(self):
        ours = self.points(_sdk.plain_recorder)
        assert ours == self.points(lambda histogram: histogram.record)
        assert len(ours) == 5

    def test_the_fast_path_is_taken_for_plain_attributes(self, monkeypatch):
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics._internal.instrument import _Histogram

        assert _sdk._measurement_kinds() is not None
        histogram = MeterProvider().get_meter("m").create_histogram("h")
        record = _sdk.plain_recorder(histogram)
        monkeypatch.setattr(_Histogram, "record",
                            lambda *a, **k: pytest.fail("went through the SDK"))
        record(0.5, {"op": "chat", "port": 8000, "stream": True, "t": 0.25})

    def test_anything_but_the_sdks_histogram_is_its_own_record(self):
        from opentelemetry.metrics import NoOpMeterProvider

        histogram = NoOpMeterProvider().get_meter("m").create_histogram("h")
        assert _sdk.plain_recorder(histogram) == histogram.record
