"""agent_latency._inject: the headers ``propagate.inject`` writes, whatever the propagators."""

from __future__ import annotations

import importlib

import pytest
from opentelemetry import baggage, propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_latency import _inject

CONTEXTS = {
    "sampled": SpanContext(0x1F, 0x2E, False, TraceFlags(1)),
    "unsampled": SpanContext(0xA << 100, 0xB << 50, False, TraceFlags(0)),
    "tracestate": SpanContext(3, 4, True, TraceFlags(1), TraceState([("v", "1"), ("w", "2")])),
    "invalid": trace.INVALID_SPAN_CONTEXT,
}


class _Marker(TraceContextTextMapPropagator):
    """A propagator of the program's own: writes a header of its own too."""

    def inject(self, carrier, context=None, setter=None) -> None:
        carrier["x-marker"] = "1"


@pytest.fixture
def textmap():
    """Sets the global textmap for one test, then puts the one before back."""
    before = propagate.get_global_textmap()
    yield propagate.set_global_textmap
    propagate.set_global_textmap(before)


def both(context) -> tuple[dict, dict]:
    fast: dict[str, str] = {}
    slow: dict[str, str] = {}
    _inject.inject(fast, context)
    propagate.inject(slow, context=context)
    return fast, slow


class TestSameHeaders:
    """Every case writes exactly what propagate.inject writes."""

    @pytest.mark.parametrize("name", sorted(CONTEXTS))
    def test_default_propagators(self, name, textmap):
        textmap(CompositePropagator([TraceContextTextMapPropagator(),
                                     W3CBaggagePropagator()]))
        context = trace.set_span_in_context(NonRecordingSpan(CONTEXTS[name]))
        fast, slow = both(context)
        assert fast == slow
        assert bool(fast) == (name != "invalid")

    def test_with_baggage(self, textmap):
        textmap(CompositePropagator([TraceContextTextMapPropagator(),
                                     W3CBaggagePropagator()]))
        context = baggage.set_baggage("user", "u1", trace.set_span_in_context(
            NonRecordingSpan(CONTEXTS["sampled"])))
        fast, slow = both(context)
        assert fast == slow
        assert fast["baggage"] == "user=u1"

    @pytest.mark.parametrize("propagators", [
        [W3CBaggagePropagator(), TraceContextTextMapPropagator()],
        [TraceContextTextMapPropagator()],
        [TraceContextTextMapPropagator(), W3CBaggagePropagator(), _Marker()],
    ], ids=["reordered", "tracecontext-only", "extra"])
    def test_other_propagators_go_through_the_api(self, propagators, textmap):
        textmap(CompositePropagator(propagators))
        context = trace.set_span_in_context(NonRecordingSpan(CONTEXTS["tracestate"]))
        fast, slow = both(context)
        assert fast == slow

    def test_a_textmap_set_later_is_seen(self, textmap):
        context = trace.set_span_in_context(NonRecordingSpan(CONTEXTS["sampled"]))
        textmap(CompositePropagator([TraceContextTextMapPropagator(),
                                     W3CBaggagePropagator()]))
        _inject.inject({}, context)
        textmap(_Marker())
        fast, slow = both(context)
        assert fast == slow == {"x-marker": "1"}


class TestFastPath:
    """The default propagators are not called at all where the fast path applies."""

    def test_not_called(self, textmap, monkeypatch):
        textmap(CompositePropagator([TraceContextTextMapPropagator(),
                                     W3CBaggagePropagator()]))
        monkeypatch.setattr(propagate, "inject", lambda *a, **k: pytest.fail("slow path"))
        carrier: dict[str, str] = {}
        _inject.inject(carrier, trace.set_span_in_context(NonRecordingSpan(
            CONTEXTS["sampled"])))
        assert carrier == {"traceparent": f"00-{0x1F:032x}-{0x2E:016x}-01"}


def _headers_types() -> list:
    """httpx's and httpx2's Headers (the test environment installs both)."""
    return [pytest.param(importlib.import_module(name).Headers, id=name)
            for name in ("httpx", "httpx2")]


class TestHttpxHeaders:
    """On httpx's and httpx2's Headers the rows written are the ones __setitem__ writes."""

    @pytest.fixture(autouse=True)
    def _default(self, textmap):
        textmap(CompositePropagator([TraceContextTextMapPropagator(),
                                     W3CBaggagePropagator()]))

    @pytest.mark.parametrize("headers_type", _headers_types())
    @pytest.mark.parametrize("name", sorted(CONTEXTS))
    def test_same_rows(self, headers_type, name):
        context = trace.set_span_in_context(NonRecordingSpan(CONTEXTS[name]))
        fast = headers_type({"Content-Type": "application/json", "X-Other": "1"})
        slow = headers_type({"Content-Type": "application/json", "X-Other": "1"})
        _inject.inject(fast, context)
        propagate.inject(slow, context=context)
        assert fast.raw == slow.raw
        assert fast.get("traceparent") == slow.get("traceparent")

    @pytest.mark.parametrize("headers_type", _headers_types())
    def test_a_traceparent_already_there_is_replaced(self, headers_type):
        context = trace.set_span_in_context(NonRecordingSpan(CONTEXTS["sampled"]))
        headers = headers_type([("TraceParent", "00-old"), ("traceparent", "00-older")])
        _inject.inject(headers, context)
        assert headers.get_list("traceparent") == [f"00-{0x1F:032x}-{0x2E:016x}-01"]


class TestOddContexts:
    """Contexts the fast path does not expect write what propagate.inject writes."""

    def test_no_span(self, textmap):
        textmap(CompositePropagator([TraceContextTextMapPropagator(),
                                     W3CBaggagePropagator()]))
        from opentelemetry.context import Context

        fast, slow = both(Context())
        assert fast == slow == {}

    def test_not_a_span(self, textmap):
        textmap(CompositePropagator([TraceContextTextMapPropagator(),
                                     W3CBaggagePropagator()]))
        from opentelemetry.context import Context
        from opentelemetry.trace.propagation import _SPAN_KEY

        fast, slow = both(Context({_SPAN_KEY: object()}))
        assert fast == slow == {}
