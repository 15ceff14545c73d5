"""OTLP/JSON written straight from the SDK's ``ReadableSpan``: no protobuf on the way.

The same document as the OTLP exporter's protobuf encoding (``encode_spans``) put through
protobuf's JSON mapping, with the two differences the OTLP/JSON spec makes: ids are hex,
not base64, and enums (span kind, status code) are integers.  Fields at their default value
(empty, zero) are left out, as protobuf's JSON mapping leaves them out; 64-bit integers are
strings.  ``tests/test_local_file.py`` holds the equality with the protobuf path.

The JSON text is written directly, with precomputed fragments per attribute key and the
json module's C string encoder: building dicts for ``json.dumps`` cost more than the 20 µs
per span this path is allowed (nested small dicts are slow to serialize); the protobuf path
(message objects, then ``MessageToDict``) cost several times that.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from ._sdk import attributes_of, bounded_dict

# SDK SpanKind is 0-based (INTERNAL=0); OTLP's is 1-based (0 is UNSPECIFIED).
_KIND = {0: 1, 1: 2, 2: 3, 3: 4, 4: 5}
_CACHE_LIMIT = 64

# By id, with the object kept (so the id is not reused) and checked.
_resource_cache: dict[int, tuple[Any, str]] = {}
_scope_cache: dict[int, tuple[Any, str]] = {}
# ',{"key":"<key>","value":{' per attribute key seen: keys repeat on every span.
_key_prefix: dict[str, str] = {}

_quote = encode_basestring_ascii  # the json module's C string encoder


def encode_line(spans: Sequence[ReadableSpan]) -> bytes:
    """One ``ExportTraceServiceRequest`` for ``spans`` as one compact OTLP/JSON line, newline
    included, in UTF-8 (all non-ASCII escaped).  Spans are grouped by resource and
    instrumentation scope in first-seen order, as the OTLP exporter groups them."""
    # By identity, not hash: Resource and InstrumentationScope hash by serializing their
    # attributes, which cost more than encoding the span.  Equal ones that are distinct
    # objects are merged after, so the grouping is the OTLP exporter's.
    by_resource: dict[int, tuple[Any, dict[int, tuple[Any, list[str]]]]] = {}
    for span in spans:
        resource = span.resource
        group = by_resource.get(id(resource))
        if group is None:
            group = by_resource[id(resource)] = (resource, {})
        scope = span.instrumentation_scope or None
        encoded = group[1].get(id(scope))
        if encoded is None:
            encoded = group[1][id(scope)] = (scope, [])
        encoded[1].append(encode_span(span))
    grouped = [(resource, _merge_equal(scopes)) for resource, scopes in _merge_equal(
        (resource, scopes.values()) for resource, scopes in by_resource.values())]
    # One list of pieces, one join, one encode: each extra copy of a batch's text costs
    # about a µs per span.
    pieces = ['{"resourceSpans":[']
    for r, (resource, scopes) in enumerate(grouped):
        pieces.append(',{"resource":' if r else '{"resource":')
        pieces.append(_resource(resource))
        pieces.append(',"scopeSpans":[')
        for s, (scope, encoded) in enumerate(scopes):
            pieces.append(',{"scope":' if s else '{"scope":')
            pieces.append(_scope(scope))
            pieces.append(',"spans":[')
            pieces.append(",".join(encoded))
            pieces.append("]")
            if scope is not None and scope.schema_url:
                pieces.append(',"schemaUrl":' + _quote(scope.schema_url))
            pieces.append("}")
        pieces.append("]")
        if resource.schema_url:
            pieces.append(',"schemaUrl":' + _quote(resource.schema_url))
        pieces.append("}")
    pieces.append("]}\n")
    return "".join(pieces).encode("ascii")


def _merge_equal(groups: Any) -> list[tuple[Any, Any]]:
    """``[(key, items)]`` with the items of equal keys joined, in first-seen order."""
    merged: list[tuple[Any, Any]] = []
    for key, items in groups:
        for known, known_items in merged:
            if known is key or known == key:
                known_items.extend(items)
                break
        else:
            merged.append((key, list(items)))
    return merged


def encode_request(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """``encode_line`` as a dict (the JSON document it writes, parsed)."""
    return json.loads(encode_line(spans))


def encode_span(span: ReadableSpan) -> str:
    """One span in OTLP/JSON, as JSON text."""
    context = span.context
    parent = span.parent
    out = f'{{"traceId":"{context.trace_id:032x}","spanId":"{context.span_id:016x}"'
    trace_state = context.trace_state
    if trace_state:
        out += ',"traceState":' + _quote(",".join(f"{k}={v}" for k, v in trace_state.items()))
    if parent is not None:
        out += (f',"parentSpanId":"{parent.span_id:016x}","flags":'
                + ("768" if parent.is_remote else "256"))
    else:
        out += ',"flags":256'
    if span.name:
        out += ',"name":' + _quote(span.name)
    out += f',"kind":{_KIND[span.kind.value]}'
    if span.start_time:
        out += f',"startTimeUnixNano":"{span.start_time}"'
    if span.end_time:
        out += f',"endTimeUnixNano":"{span.end_time}"'
    attributes = attributes_of(span)
    if attributes:
        out += ',"attributes":[' + encode_attributes(attributes) + "]"
    if span.dropped_attributes:
        out += f',"droppedAttributesCount":{span.dropped_attributes}'
    events = span.events
    if events:
        out += ',"events":[' + ",".join(_event(e) for e in events) + "]"
    if span.dropped_events:
        out += f',"droppedEventsCount":{span.dropped_events}'
    links = span.links
    if links:
        out += ',"links":[' + ",".join(_link(link) for link in links) + "]"
    if span.dropped_links:
        out += f',"droppedLinksCount":{span.dropped_links}'
    status = span.status
    if status is not None and (status.status_code.value or status.description):
        fields = []
        if status.status_code.value:
            fields.append(f'"code":{status.status_code.value}')
        if status.description:
            fields.append('"message":' + _quote(status.description))
        out += ',"status":{' + ",".join(fields) + "}}"
    else:
        out += ',"status":{}}'
    return out


def encode_attributes(attributes: Mapping[str, Any]) -> str:
    """``{"key":…,"value":{…}},…`` (without the brackets) for an attribute mapping; a value
    of a type OTLP has no place for is left out, as the OTLP exporter leaves it out."""
    out: list[str] = []
    append = out.append
    for key, value in attributes.items():
        prefix = _key_prefix.get(key)
        if prefix is None:
            prefix = _remember_key(key)
        kind = type(value)
        # The common types first, by exact type (an isinstance chain costs per attribute),
        # each as one f-string (one allocation, where + makes one per operand).
        if kind is str:
            append(f'{prefix}"stringValue":{_quote(value)}}}}}')
        elif kind is int and -_INT64 <= value < _INT64:
            append(f'{prefix}"intValue":"{value}"}}}}')
        elif kind is bool:
            append(prefix + ('"boolValue":true}}' if value else '"boolValue":false}}'))
        elif kind is float and value - value == 0.0:  # finite
            append(f'{prefix}"doubleValue":{value!r}}}}}')
        else:
            try:
                append(prefix[:-1] + encode_value(value) + "}")
            except (TypeError, ValueError):
                pass
    return "".join(out)[1:]  # without the first prefix's comma


_INT64 = 1 << 63


def _remember_key(key: str) -> str:
    prefix = ',{"key":' + _quote(str(key)) + ',"value":{'
    if len(_key_prefix) < 4096:  # keys are few; a program making endless new ones is not
        _key_prefix[key] = prefix
    return prefix


def encode_value(value: Any) -> str:
    """One ``AnyValue`` as JSON text."""
    if value is None:
        return "{}"
    if isinstance(value, bool):
        return '{"boolValue":true}' if value else '{"boolValue":false}'
    if isinstance(value, str):
        return '{"stringValue":' + _quote(value) + "}"
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise ValueError("int64 out of range")
        return f'{{"intValue":"{int(value)}"}}'
    if isinstance(value, float):
        if math.isfinite(value):
            return '{"doubleValue":' + repr(value) + "}"
        return ('{"doubleValue":"NaN"}' if value != value else
                '{"doubleValue":"Infinity"}' if value > 0 else '{"doubleValue":"-Infinity"}')
    if isinstance(value, bytes):
        return '{"bytesValue":"' + base64.b64encode(value).decode("ascii") + '"}'
    if isinstance(value, Sequence):
        values = ",".join([encode_value(v) for v in value])
        return '{"arrayValue":{' + (f'"values":[{values}]' if value else "") + "}}"
    if isinstance(value, Mapping):
        pairs = ",".join('{"key":' + _quote(str(k)) + ',"value":' + encode_value(v) + "}"
                         for k, v in value.items())
        return '{"kvlistValue":{' + (f'"values":[{pairs}]' if value else "") + "}}"
    raise TypeError(f"invalid attribute type {type(value).__name__}")


def _plain(attributes: Any) -> Any:
    """The plain dict inside the SDK's ``BoundedAttributes``, when there is one.

    ``BoundedAttributes`` is a ``MutableMapping`` whose ``items()`` calls a Python
    ``__getitem__`` per key (and ``ReadableSpan.attributes`` wraps it in a proxy): iterating
    it costs more than encoding.  Its ``_dict`` is private, so anything else falls back to
    the public mapping.
    """
    inner = bounded_dict(attributes)
    return attributes if inner is None else inner


def _event(event: Any) -> str:
    fields = []
    if event.timestamp:
        fields.append(f'"timeUnixNano":"{event.timestamp}"')
    if event.name:
        fields.append('"name":' + _quote(event.name))
    attributes = _plain(event.attributes)
    if attributes:
        fields.append('"attributes":[' + encode_attributes(attributes) + "]")
    if event.dropped_attributes:
        fields.append(f'"droppedAttributesCount":{event.dropped_attributes}')
    return "{" + ",".join(fields) + "}"


def _link(link: Any) -> str:
    context = link.context
    fields = [f'"traceId":"{context.trace_id:032x}","spanId":"{context.span_id:016x}"']
    attributes = _plain(link.attributes)
    if attributes:
        fields.append('"attributes":[' + encode_attributes(attributes) + "]")
    if link.dropped_attributes:
        fields.append(f'"droppedAttributesCount":{link.dropped_attributes}')
    fields.append('"flags":768' if context.is_remote else '"flags":256')
    return "{" + ",".join(fields) + "}"


def _resource(resource: Any) -> str:
    return _cached(_resource_cache, resource, _encode_resource)


def _cached(cache: dict[int, tuple[Any, str]], obj: Any, encode: Any) -> str:
    # Resources and scopes are few and immutable: encoded once each.
    entry = cache.get(id(obj))
    if entry is not None and entry[0] is obj:
        return entry[1]
    encoded = encode(obj)
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[id(obj)] = (obj, encoded)
    return encoded


def _encode_resource(resource: Any) -> str:
    attributes = _plain(resource.attributes)
    return '{"attributes":[' + encode_attributes(attributes) + "]}" if attributes else "{}"


def _scope(scope: Any) -> str:
    return "{}" if scope is None else _cached(_scope_cache, scope, _encode_scope)


def _encode_scope(scope: Any) -> str:
    fields = []
    if scope.name:
        fields.append('"name":' + _quote(scope.name))
    if scope.version:
        fields.append('"version":' + _quote(scope.version))
    attributes = _plain(scope.attributes)
    if attributes:
        fields.append('"attributes":[' + encode_attributes(attributes) + "]")
    return "{" + ",".join(fields) + "}"
