"""The W3C ``traceparent`` of a request we trace, written as ``propagate.inject`` writes it.

``propagate.inject`` costs ~38 Python calls per request with the SDK's default propagators
(the composite, each propagator, the context and baggage lookups, the id formatting), more
than any other single step of a plain LLM call's recording.  With the default propagators
(``tracecontext`` then ``baggage``, what ``OTEL_PROPAGATORS`` unset gives) and no baggage in
the context, what they write is the ``traceparent`` header, and ``tracestate`` when the span
has one: written here directly, in ~3 calls (the context read as the dict it is, an httpx
``Headers`` appended to as its own ``__setitem__`` does for a new name).  Any other
propagator set (``b3``, a vendor's, a composite in another order), or baggage to carry, goes
through ``propagate.inject``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext

from ._sdk import BAGGAGE_KEY, SPAN_KEY, default_textmap

__all__ = ["inject"]

# (the global textmap last seen, whether it is the default pair): checked once per object.
_seen: list[Any] = [None, False]
_TRACEPARENT = b"traceparent"


def inject(carrier: Any, context: Context) -> None:
    """``propagate.inject(carrier, context=context)``, cheaply where the result is the same."""
    textmap = propagate.get_global_textmap()
    seen = _seen
    if textmap is not seen[0]:
        seen[1] = default_textmap(textmap) and SPAN_KEY is not None
        seen[0] = textmap
    if not seen[1] or context.get(BAGGAGE_KEY):
        propagate.inject(carrier, context=context)
        return
    span = context.get(SPAN_KEY)
    if span is None:
        return  # (no span: the API's propagator writes nothing either)
    get = getattr(span, "get_span_context", None)
    span_context = get() if get is not None else None
    if type(span_context) is not SpanContext:
        propagate.inject(carrier, context=context)  # not a span of the API's: as it does
        return
    if span_context == trace.INVALID_SPAN_CONTEXT:
        return
    # A SpanContext is the tuple (trace_id, span_id, is_remote, trace_flags, trace_state,
    # is_valid): unpacked in C, where its properties are a Python call each.
    trace_id, span_id, _remote, flags, state, _valid = span_context
    value = f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"
    rows = getattr(carrier, "_list", None)
    appended = False
    if type(rows) is list:
        # httpx's and httpx2's Headers: rows of (name, lower-case name, value) in bytes,
        # appended to as their ``__setitem__`` does for a new name (which also scans the rows
        # in a list comprehension and re-encodes); a name already there is theirs to replace.
        for row in rows:
            if row[1] == _TRACEPARENT:
                break
        else:
            rows.append((_TRACEPARENT, _TRACEPARENT, value.encode("ascii")))
            appended = True
    if not appended:
        carrier["traceparent"] = value
    if state is not None and state.keys():
        carrier["tracestate"] = state.to_header()
