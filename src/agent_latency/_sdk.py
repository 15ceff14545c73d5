"""Every read of an OpenTelemetry SDK private field, in this one module, and the writes
that lean on them (:func:`set_plain_attributes`, :func:`start_span`,
:func:`emit_finished_children`, :func:`plain_recorder`: a call's attributes, its span's
start, its phase spans and its histogram measurements, each falling back to the public API).
One idea: the SDK's private shape, checked against its public API and used where that
check passed; the sections below are the spans' fields, the batch processors, the writes
on our own spans, and the metrics SDK's measurements (checked with the first histogram).

The budget processor runs for every span of the host program, and the SDK's public
properties cost a Python call each (``ReadableSpan.parent`` is a property returning
``self._parent``; ``attributes`` wraps the attributes in a new ``MappingProxyType`` per
access).  So the hot path reads the SDK's own fields instead.  Those fields are private: a
new SDK release may rename or reshape them.  This module is where that risk lives:

* which accessor to use is decided **once, at import**: a ``ReadableSpan`` and a
  ``BoundedAttributes`` are built here and every private field is checked against the public
  property it backs.  If all agree, the accessors are ``operator.attrgetter``\\ s of the
  private fields (one C call, no Python frame); if any does not, they are ``attrgetter``\\ s
  of the public properties: slower, never wrong.  :data:`SHAPE_PROBLEM` says why.
* ``tests/test_sdk_shape.py`` fails loudly, naming the field, when the installed SDK's shape
  differs from the one expected, so a widened version range is a test run away.
* the SDK versions tested are pinned in ``pyproject.toml`` (``opentelemetry-sdk<1.46``);
  CONTRIBUTING.md says how to widen the range.

Nothing outside this module reads an SDK private attribute (the shape test also scans the
sources for it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from operator import attrgetter
from random import getrandbits
from time import time_ns
from typing import Any, cast

from opentelemetry.context import get_current

__all__ = [
    "BAGGAGE_KEY",
    "PRIVATE_FIELDS",
    "SHAPE_PROBLEM",
    "SPAN_KEY",
    "SPAN_FIELDS",
    "attribute_store",
    "attribute_blind",
    "attributes_of",
    "batch_processors",
    "batch_queue",
    "batch_worker",
    "bounded_dict",
    "default_textmap",
    "emit_finished_children",
    "end_ns",
    "ended_span_times",
    "exporter_endpoint",
    "frozen_attributes",
    "preferred_aggregation",
    "plain_recorder",
    "preferred_temporality",
    "set_plain_attributes",
    "span_id",
    "span_kind",
    "span_name",
    "span_parent",
    "span_times",
    "start_ns",
    "start_span",
]

#: Public ``ReadableSpan`` property -> the private field it returns, in the SDKs tested.
SPAN_FIELDS: dict[str, str] = {
    "name": "_name",
    "context": "_context",
    "kind": "_kind",
    "parent": "_parent",
    "start_time": "_start_time",
    "end_time": "_end_time",
}

_MISSING = object()


def shape_problem() -> str | None:
    """Why the installed SDK does not have the private shape this module reads; None if it has.

    Builds a real ``ReadableSpan`` (the base of every SDK span) and a real
    ``BoundedAttributes`` and checks each private field is the very object the public API
    returns, and that a write to ``BoundedAttributes._dict`` shows through the span's public
    ``attributes`` (what :func:`attribute_store` relies on).
    """
    try:
        # Inside the try: an SDK without these names fails the check, not the import.
        from opentelemetry.attributes import BoundedAttributes
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind

        context = SpanContext(0x5D, 0x5E, is_remote=False)
        parent = SpanContext(0x5D, 0x5F, is_remote=True)
        attributes = BoundedAttributes(attributes={"probe": "value"})
        span = ReadableSpan("probe", context=context, parent=parent, kind=SpanKind.SERVER,
                            start_time=1_000_001, end_time=2_000_002, attributes=attributes)
        for public, private in SPAN_FIELDS.items():
            if getattr(span, private, _MISSING) is not getattr(span, public):
                return f"ReadableSpan.{private} is not what ReadableSpan.{public} returns"
        if getattr(span, "_attributes", _MISSING) is not attributes:
            return "ReadableSpan._attributes is not the BoundedAttributes it was given"
        inner = getattr(attributes, "_dict", None)
        if type(inner) is not dict or inner != {"probe": "value"}:
            return "BoundedAttributes._dict is not a plain dict of the attributes"
        inner["written"] = 1
        if (span.attributes or {}).get("written") != 1:
            return "a write to BoundedAttributes._dict does not show in ReadableSpan.attributes"
    except Exception as exc:  # noqa: BLE001 - any surprise means: use the public API
        return f"probing the SDK failed: {exc!r}"
    return None


#: None when the SDK has the expected private shape; otherwise the reason it has not.
SHAPE_PROBLEM: str | None = shape_problem()
#: Whether the accessors below read the SDK's private fields (True) or its public API.
PRIVATE_FIELDS: bool = SHAPE_PROBLEM is None
if SHAPE_PROBLEM is not None:
    logging.getLogger("agent_latency").debug(
        "agent-latency: %s; reading the public span API (slower)", SHAPE_PROBLEM)


def _field(public: str) -> Callable[[Any], Any]:
    return attrgetter(SPAN_FIELDS[public] if PRIVATE_FIELDS else public)


#: ``span.name``.
span_name: Callable[[Any], str] = _field("name")
#: ``span.kind`` (a ``SpanKind``).
span_kind: Callable[[Any], Any] = _field("kind")
#: ``span.parent``: the parent's ``SpanContext``, or None.
span_parent: Callable[[Any], Any] = _field("parent")
#: ``span.start_time`` (ns since the epoch, or None before start).
start_ns: Callable[[Any], int | None] = _field("start_time")
#: ``span.end_time`` (ns since the epoch, or None before end).
end_ns: Callable[[Any], int | None] = _field("end_time")
#: ``(span.start_time, span.end_time)``, in one call (the hot path reads both, often twice).
span_times: Callable[[Any], tuple[int | None, int | None]] = attrgetter(
    *(SPAN_FIELDS[f] if PRIVATE_FIELDS else f for f in ("start_time", "end_time")))
#: :data:`span_times` typed for a span that has ended (``on_end``), where both are set.
ended_span_times = cast("Callable[[Any], tuple[int, int]]", span_times)
#: ``span.context.span_id``, in one call.
span_id: Callable[[Any], int] = attrgetter(
    "_context.span_id" if PRIVATE_FIELDS else "context.span_id")


def bounded_dict(attributes: Any) -> dict[str, Any] | None:
    """The plain dict inside the SDK's ``BoundedAttributes``; None for anything else.

    ``BoundedAttributes`` is a ``MutableMapping`` whose ``items()`` calls a Python
    ``__getitem__`` per key: iterating the dict inside costs a fraction of that.
    """
    if not PRIVATE_FIELDS:
        return None
    inner = getattr(attributes, "_dict", None)
    return inner if type(inner) is dict else None


if PRIVATE_FIELDS:
    def attributes_of(span: Any) -> Mapping[str, Any]:
        """A span's attributes as a plain mapping, cheaply (the dict the SDK keeps)."""
        try:
            return span._attributes._dict
        except AttributeError:
            return span.attributes or {}
else:
    def attributes_of(span: Any) -> Mapping[str, Any]:
        """A span's attributes as a plain mapping (the public, read-only view)."""
        return span.attributes or {}


def attribute_store(span: Any) -> dict[str, Any] | None:
    """The mutable dict an ended span's public ``attributes`` reads; None when there is none.

    The SDK freezes attributes in ``end()``; writing here instead reaches every processor
    and exporter that reads the span afterwards (see ``processor._set_on_ended_span``).
    """
    if not PRIVATE_FIELDS:
        return None
    attributes = getattr(span, "_attributes", None)
    inner = bounded_dict(attributes)
    if inner is not None:
        return inner
    return attributes if isinstance(attributes, dict) else None


def exporter_endpoint(exporter: object) -> Any:
    """Where an OTLP exporter sends (its private ``_endpoint``); None if it has none."""
    return getattr(exporter, "_endpoint", None)


def preferred_temporality(exporter: object) -> Any:
    """A metric exporter's preferred temporality, as the SDK's periodic reader reads it."""
    return getattr(exporter, "_preferred_temporality", None)


def preferred_aggregation(exporter: object) -> Any:
    """A metric exporter's preferred aggregation, as the SDK's periodic reader reads it."""
    return getattr(exporter, "_preferred_aggregation", None)


def batch_processors(provider: object) -> list[Any]:
    """The SDK batch processors behind a provider's ``BatchSpanProcessor``s (their private
    ``_batch_processor``), for the fork and signal paths; none when the shape differs."""
    multi = getattr(provider, "_active_span_processor", None)
    return [bp for p in getattr(multi, "_span_processors", ())
            if (bp := getattr(p, "_batch_processor", None)) is not None]


def remove_span_processors(provider: object, processors: list[Any]) -> bool:
    """Take ``processors`` out of an SDK tracer provider (its private multi-processor's
    tuple, replaced under its lock as ``add_span_processor`` does); False when the shape
    differs and nothing was changed."""
    multi = getattr(provider, "_active_span_processor", None)
    lock = getattr(multi, "_lock", None)
    current = getattr(multi, "_span_processors", None)
    if lock is None or not isinstance(current, tuple):
        return False
    with lock:
        multi._span_processors = tuple(  # type: ignore[union-attr]  # checked above
            p for p in current if not any(p is q for q in processors))
    return True


def batch_worker(batch: object) -> Any:
    """A batch processor's worker thread while it is shutting down, else None."""
    if not getattr(batch, "_shutdown", False):
        return None
    return getattr(batch, "_worker_thread", None)


def pause_batch(batch: object, timeout_s: float) -> bool | None:
    """Stop a batch processor's worker thread (it exports what is queued first) and wait
    for it, at most ``timeout_s``: whether it stopped, None when the shape differs and
    nothing was done.  Unless None, the processor stays marked shut down until
    :func:`resume_batch` (a worker still exporting leaves once its export is done)."""
    worker = getattr(batch, "_worker_thread", None)
    awaken = getattr(batch, "_worker_awaken", None)
    if (worker is None or awaken is None or getattr(batch, "_shutdown", True)
            or not callable(getattr(batch, "worker", None))):
        return None
    batch._shutdown = True  # type: ignore[attr-defined]  # checked above
    awaken.set()
    worker.join(timeout_s)
    return not worker.is_alive()


def resume_batch(batch: object, start: bool = True) -> None:
    """Undo :func:`pause_batch`: accepting spans again, with a new worker thread unless
    ``start`` is False (a forked child, where the SDK's own fork hook starts it)."""
    batch._shutdown = False  # type: ignore[attr-defined]  # paused by pause_batch
    if not start:
        return
    old = batch._worker_thread  # type: ignore[attr-defined]  # paused by pause_batch
    worker = threading.Thread(name=old.name, target=batch.worker,  # type: ignore[attr-defined]
                              daemon=True)
    batch._worker_thread = worker  # type: ignore[attr-defined]
    worker.start()


def batch_queue(batch: object) -> Any:
    """A batch processor's queue of ended spans (a deque), or None."""
    return getattr(batch, "_queue", None)


def batch_of(processor: object) -> Any:
    """The SDK batch processor behind a ``BatchSpanProcessor`` (its private
    ``_batch_processor``), or None when the shape differs."""
    return getattr(processor, "_batch_processor", None)


def worker_thread(batch: object) -> Any:
    """A batch processor's worker thread, running or not, or None when the shape differs."""
    return getattr(batch, "_worker_thread", None)


def span_batch_queue(processor: object) -> Any:
    """The queue (a deque with its ``maxlen``) behind a ``BatchSpanProcessor``, or None."""
    return batch_queue(batch_of(processor))


# -- writes on our own spans ------------------------------------------------------------------
# Attribute values the SDK stores as given (``_clean_attribute_value`` returns them as they
# are): exact types, so a subclass (an IntEnum, a numpy float) still goes through the SDK.
_SCALARS = frozenset({str, bool, int, float})

try:
    from opentelemetry.attributes import BoundedAttributes as _Bounded
    from opentelemetry.sdk.trace import ReadableSpan as _ReadableSpan
    from opentelemetry.trace import SpanContext as _SpanContext
    from opentelemetry.trace import SpanKind as _SpanKind
    from opentelemetry.trace import TraceFlags as _TraceFlags
except ImportError:  # pragma: no cover - the SDK is a core dependency
    _Bounded = _ReadableSpan = _SpanContext = _SpanKind = _TraceFlags = None  # type: ignore[assignment,misc]

try:  # the API's context keys, for a context read as the dict it is (``_inject``)
    from opentelemetry.baggage import _BAGGAGE_KEY
    from opentelemetry.trace.propagation import _SPAN_KEY
except ImportError:  # pragma: no cover - an API without them: its functions are used
    _BAGGAGE_KEY = _SPAN_KEY = None  # type: ignore[assignment]

#: The keys under which a context holds its baggage and its span (None where not found).
BAGGAGE_KEY: Any = _BAGGAGE_KEY
SPAN_KEY: Any = _SPAN_KEY

try:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator as _RandomIds
except ImportError:  # pragma: no cover - the SDK is a core dependency
    _RandomIds = None  # type: ignore[assignment,misc]


def _context_is_its_tuple() -> bool:
    """Whether a ``SpanContext`` is the tuple ``(trace_id, span_id, is_remote, trace_flags,
    trace_state, is_valid)`` its constructor builds (so a child's can be built as that tuple,
    without the constructor's Python call)."""
    try:
        flags = _TraceFlags(1)
        probe = _SpanContext(5, 6, False, flags, None)
        return tuple(probe) == (5, 6, False, flags, probe.trace_state, True)
    except Exception:  # noqa: BLE001 - any surprise: the constructor
        return False


_CONTEXT_TUPLE = _SpanContext is not None and _context_is_its_tuple()


def _plain(values: Any) -> bool:
    """Whether every value is one the SDK keeps unchanged: a str, bool, int or float, or a
    tuple of one of them (what ``_clean_attribute_value`` makes of a homogeneous list)."""
    if _SCALARS.issuperset(map(type, values)):
        return True
    for value in values:
        kind = type(value)
        if kind in _SCALARS:
            continue
        if kind is not tuple:
            return False
        kinds = set(map(type, value))
        if len(kinds) > 1 or not _SCALARS.issuperset(kinds):
            return False
    return True


def set_plain_attributes(span: Any, attributes: dict[str, Any],
                         sequences: dict[str, Any] | None = None) -> None:
    """``span.set_attributes(attributes)`` (then ``sequences``), for attributes this
    library built itself.

    The SDK re-validates every value (``_clean_attribute_value``: an ``isinstance`` chain
    through ``collections.abc`` per value, ~40 attributes on a call span).  When the values
    are already what it would store (:func:`_plain`), no limit can act (no value length
    limit, room for them all under the count limit) and the span is still recording, they
    are written into its attribute dict under its lock: the same attributes, read the same
    way by every processor and exporter.  Anything else goes through the SDK.
    ``sequences``: the attributes whose values are tuples, given apart: the types of
    scalars are checked in one C pass, a tuple among them sends every value through a
    Python loop (~20,000 instructions for a call span's ~40).
    """
    if PRIVATE_FIELDS:
        store = getattr(span, "_attributes", None)
        lock = getattr(span, "_lock", None)
        count = len(attributes) + (len(sequences) if sequences else 0)
        if (type(store) is _Bounded and lock is not None and store.max_value_len is None
                and not store._immutable
                and (store.maxlen is None or len(store._dict) + count <= store.maxlen)
                and _plain(attributes.values())
                and (not sequences or _plain(sequences.values()))):
            with lock:
                if getattr(span, "_end_time", 0) is None:
                    store._dict.update(attributes)
                    if sequences:
                        store._dict.update(sequences)
                    return
    span.set_attributes(attributes)
    if sequences:
        span.set_attributes(sequences)


def start_span(tracer: Any, name: str, kind: Any, attributes: dict[str, Any],
               start_time: int) -> Any:
    """``tracer.start_span(name, kind=kind, attributes=attributes, start_time=start_time)``,
    for attributes this library built itself.

    The SDK validates each attribute given to ``start_span`` (``_clean_attribute_value``,
    ~6,000 instructions a value under callgrind: a call span's nine, ~57,000, two thirds of
    what the span's own start costs).  Where
    the tracer's sampler is one of the SDK's own, which hand the attributes on unread
    (:func:`attribute_blind`), the span starts without them and they are written
    right after (:func:`set_plain_attributes`): the same span, sampled the same way.  Span
    processors' ``on_start`` sees it without them (``on_end`` with all of them).  A sampler
    of any other kind gets them at the start, as the SDK would give them.
    """
    global _last_start_tracer
    last = _last_start_tracer  # (one tuple, replaced whole: threads never see half of one)
    if last[0] is tracer:
        blind = last[1]
    else:
        blind = PRIVATE_FIELDS and attribute_blind(getattr(tracer, "sampler", None))
        _last_start_tracer = (tracer, blind)
    if not blind:
        return tracer.start_span(name, kind=kind, attributes=attributes,
                                 start_time=start_time)
    span = tracer.start_span(name, kind=kind, start_time=start_time)
    set_plain_attributes(span, attributes)
    return span


# The tracer a call span last started on, and whether its sampler is attribute_blind.
_last_start_tracer: tuple[Any, bool] = (None, False)

try:
    from opentelemetry.sdk.trace import sampling as _sampling
except ImportError:  # pragma: no cover - the SDK is a core dependency
    _sampling = None  # type: ignore[assignment]

# The SDK's samplers that hand a span's attributes on unread (exact types: a subclass may
# override should_sample), and the fields holding the samplers a wrapping one delegates to.
_BLIND_SAMPLERS = frozenset(
    kind for name in ("StaticSampler", "TraceIdRatioBased", "_AlwaysOn", "_AlwaysOff")
    if (kind := getattr(_sampling, name, None)) is not None)
_PARENT_BASED = ("_root", "_remote_parent_sampled", "_remote_parent_not_sampled",
                 "_local_parent_sampled", "_local_parent_not_sampled")
_WRAPPING = {
    kind: fields for name, fields in (
        ("ParentBased", _PARENT_BASED), ("ParentBasedTraceIdRatio", _PARENT_BASED),
        ("_ParentBasedAlwaysOn", _PARENT_BASED), ("_ParentBasedAlwaysOff", _PARENT_BASED),
        ("AlwaysRecordSampler", ("_root",)))
    if (kind := getattr(_sampling, name, None)) is not None}


def attribute_blind(sampler: Any) -> bool:
    """Whether ``sampler`` is one of the SDK's own samplers, every sampler it delegates to
    too, none of which reads a span's attributes (they pass them on to the span as given)."""
    kind = type(sampler)
    if kind in _BLIND_SAMPLERS:
        return True
    fields = _WRAPPING.get(kind)
    if fields is None:
        return False
    return all(attribute_blind(getattr(sampler, field, None)) for field in fields)


# -- plain measurements -----------------------------------------------------------------------
_MEASUREMENT_FIELDS = ("value", "time_unix_nano", "instrument", "context", "attributes")
# Where the SDK's histograms live: checked before anything of the metrics SDK is imported
# (importing it here would add its ~30 modules to every program's start).
_SDK_INSTRUMENTS = "opentelemetry.sdk.metrics._internal.instrument"
_INFINITY = float("inf")


def _measurement_kinds() -> tuple[Any, Any] | None:
    """``(the SDK's Histogram class, its Measurement class)`` where a ``Measurement`` is a
    dataclass of exactly :data:`_MEASUREMENT_FIELDS` that stores a mapping of plain values
    as an equal plain dict (then one made by filling those fields is the one its
    constructor makes); None otherwise."""
    try:
        # Here, not at import: the metrics SDK waits for a histogram (see _SDK_INSTRUMENTS).
        import dataclasses

        from opentelemetry.sdk.metrics._internal.instrument import _Histogram
        from opentelemetry.sdk.metrics._internal.measurement import Measurement

        if tuple(f.name for f in dataclasses.fields(Measurement)) != _MEASUREMENT_FIELDS:
            return None
        values: tuple[Any, ...] = (1.5, 7, None, get_current(),
                                   {"probe": "value", "n": 1, "f": 0.5, "b": True})
        built = Measurement(*values)
        made = Measurement.__new__(Measurement)
        made.__dict__.update(zip(_MEASUREMENT_FIELDS, values, strict=True))
        if (made == built and vars(made) == vars(built)
                and type(built.attributes) is dict and built.attributes is not values[-1]):
            return _Histogram, Measurement
    except Exception:  # noqa: BLE001 - any surprise: the SDK's record
        return None
    return None


_measurement_shape: list[Any] = []  # [_measurement_kinds()] once asked


def plain_recorder(histogram: Any) -> Callable[[float, dict[str, Any]], None]:
    """``histogram.record``, for attributes this library built itself (string keys).

    The SDK validates a measurement's attributes in ``Measurement.__post_init__``
    (``_clean_attribute_value`` on the mapping and on each value: ~34,000 instructions of a
    histogram record's ~112,000 with seven attributes; a plain call records three).  Where
    the histogram is the SDK's own, the amount one it takes (finite, not negative) and every
    value already what the validation would keep (a str, bool, int or float), the
    measurement is made with a copy of the attributes, as the validation makes, and handed
    to the histogram's consumer as ``record`` hands it; anything else goes through
    ``record``.
    """
    record = cast("Callable[[float, dict[str, Any]], None]", histogram.record)
    if not PRIVATE_FIELDS or type(histogram).__module__ != _SDK_INSTRUMENTS:
        return record
    if not _measurement_shape:
        _measurement_shape.append(_measurement_kinds())
    kinds = _measurement_shape[0]
    consume = getattr(getattr(histogram, "_measurement_consumer", None),
                      "consume_measurement", None)
    if (kinds is None or type(histogram) is not kinds[0] or consume is None
            or not hasattr(histogram, "_meter_config")):
        return record

    measurement_kind = kinds[1]
    new = measurement_kind.__new__
    scalars = _SCALARS.issuperset

    def record_plain(amount: float, attributes: dict[str, Any]) -> None:
        config = histogram._meter_config
        if ((config is None or config.is_enabled) and 0 <= amount < _INFINITY
                and scalars(map(type, attributes.values()))):
            measurement = new(measurement_kind)
            measurement.__dict__.update(
                value=amount, time_unix_nano=time_ns(), instrument=histogram,
                context=get_current(), attributes=dict(attributes))
            consume(measurement)
        else:  # (NaN fails both comparisons: the SDK's own warning)
            record(amount, attributes)

    return record_plain


def frozen_attributes(attributes: Mapping[str, Any]) -> Any:
    """An immutable SDK ``BoundedAttributes`` of ``attributes``, to share between spans
    (:func:`emit_finished_children`); the mapping itself when the SDK has none."""
    return _Bounded(attributes=attributes, immutable=True) if _Bounded is not None \
        else dict(attributes)


def emit_finished_children(tracer: Any, parent: Any, children: Any, attributes: Any) -> bool:
    """Hand the tracer's span processors one finished child span of ``parent`` per
    ``(name, start_ns, end_ns)`` in ``children``, each with ``attributes`` (see
    :func:`frozen_attributes`); False, with nothing done, where the tracer or the parent
    is not the SDK's as expected (the caller starts and ends them through the tracer then).

    A call's phase spans are records of intervals already over: built as the SDK's own
    ``ReadableSpan`` (what every processor's ``on_end`` receives), on the parent's trace
    and sampling decision, they skip the sampler, the context lookups, the span lock and
    ``on_start``: a plain call's phase spans cost 34 Python calls instead of 124.
    Processors see them in ``on_end`` only, as the spans of a span that was never open;
    the SDK's own span metrics (``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED``) do not count
    them.
    """
    global _last_tracer
    if not PRIVATE_FIELDS or _ReadableSpan is None or not isinstance(parent, _ReadableSpan):
        return False
    last = _last_tracer  # (one tuple, replaced whole: threads never see half of one)
    if last[0] is tracer:
        facts = last[1]
    else:
        facts = _tracer_facts(tracer)
        _last_tracer = (tracer, facts)
    context = getattr(parent, "_context", None)
    if facts is None or type(context) is not _SpanContext:
        return False
    on_end, new_id, draw, resource, scope, info = facts
    # (trace_id, span_id, is_remote, trace_flags, trace_state, is_valid), unpacked in C: its
    # properties are a Python call each.
    trace_id, _span_id, _remote, flags, state, valid = context
    if not flags & 0x01:  # not sampled
        return False
    for name, start, end in children:
        if draw is not None:
            span_id = draw(64) or new_id()
            child = tuple.__new__(_SpanContext, (trace_id, span_id, False, flags, state,
                                                 valid))
        else:
            child = _SpanContext(trace_id, new_id(), False, flags, state)
        on_end(_ReadableSpan(
            name, child, context, resource,
            attributes, kind=_SpanKind.INTERNAL, instrumentation_info=info,
            start_time=start, end_time=end, instrumentation_scope=scope))
    return True


# The tracer phase spans were last handed over on and what they are handed with: a program
# has one tracer for its calls, whose facts are read once, not per call.
_last_tracer: tuple[Any, Any] = (None, None)


def _tracer_facts(tracer: Any) -> tuple[Any, ...] | None:
    """``(on_end, new span id, draw, resource, scope, info)`` of an SDK ``tracer``, or None
    where it is not the SDK's as expected."""
    processor = getattr(tracer, "span_processor", None)
    ids = getattr(tracer, "id_generator", None)
    resource = getattr(tracer, "resource", None)
    on_end = getattr(processor, "on_end", None)
    if on_end is None or ids is None or resource is None:
        return None
    # The SDK's default generator's ids drawn as it draws them, and each child's context
    # built as the tuple it is (the parent's trace valid, a non-zero id): two Python calls
    # a child span less.
    draw = getrandbits if type(ids) is _RandomIds and _CONTEXT_TUPLE else None
    return (on_end, ids.generate_span_id, draw, resource,
            getattr(tracer, "_instrumentation_scope", None),
            getattr(tracer, "instrumentation_info", None))


def default_textmap(textmap: Any) -> bool:
    """Whether ``textmap`` is the API's default propagator: a ``CompositePropagator`` of
    exactly ``TraceContextTextMapPropagator`` then ``W3CBaggagePropagator`` (its private
    ``_propagators``), and SpanContext unpacks as the tuple ``_inject`` reads."""
    try:
        # Inside the try: an API without these names fails the check, not the import (and
        # this runs once per global textmap object).
        from opentelemetry.baggage.propagation import W3CBaggagePropagator
        from opentelemetry.propagators.composite import CompositePropagator
        from opentelemetry.trace import SpanContext, TraceFlags, TraceState
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        probe = SpanContext(5, 6, True, TraceFlags(1), TraceState([("k", "v")]))
        if tuple(probe) != (probe.trace_id, probe.span_id, probe.is_remote, probe.trace_flags,
                            probe.trace_state, probe.is_valid):
            return False
        return (type(textmap) is CompositePropagator
                and [type(p) for p in getattr(textmap, "_propagators", ())]
                == [TraceContextTextMapPropagator, W3CBaggagePropagator])
    except Exception:  # noqa: BLE001 - any surprise: the API's own inject
        return False
