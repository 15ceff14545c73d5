"""Which events carry output, as rules a protocol states (:class:`OutputRule`) and one
compiled pattern per set of rules, searched in C (about a microsecond an event; no JSON
parse).  An event carries output when it has a text field that is not empty, a call being
generated, or a type that is output; an event of a type that is not output never does."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OutputRule:
    """One protocol's output events, read from an event's bytes."""

    #: JSON string fields that are output when not empty.
    text_fields: tuple[str, ...] = ()
    #: Fields whose object or array is a call being generated.
    call_fields: tuple[str, ...] = ()
    #: ``"type"`` values that are output events.
    output_types: frozenset[str] = frozenset()
    #: ``"type"`` values whose text fields are not output (announcements, final events).
    not_output_types: frozenset[str] = frozenset()
    #: Item types that are output the moment a ``response.output_item.added`` adds them.
    call_items: frozenset[str] = frozenset()
    #: ``event:`` names (SSE, AWS event stream) that are output events.
    output_names: frozenset[str] = frozenset()


def _alternatives(names: set[str] | frozenset[str]) -> bytes:
    return "|".join(re.escape(n) for n in sorted(names)).encode()


def classifier(*rules: OutputRule) -> Callable[[bytes], bool]:
    """``is_output(event) -> bool`` for the union of ``rules``."""
    text = {f for r in rules for f in r.text_fields}
    calls = {f for r in rules for f in r.call_fields}
    types = {t for r in rules for t in r.output_types}
    not_types = {t for r in rules for t in r.not_output_types}
    items = {t for r in rules for t in r.call_items}
    names = {n for r in rules for n in r.output_names}
    parts = []
    if text:
        # a text field that is not empty (a JSON string whose first character is not its
        # closing quote)
        parts.append(rb'"(?:' + _alternatives(text) + rb')"\s*:\s*"(?:[^"\\]|\\.)')
    if calls:
        parts.append(rb'"(?:' + _alternatives(calls) + rb')"\s*:\s*[\[{]')
    if types:
        parts.append(rb'"type"\s*:\s*"(?:' + _alternatives(types) + rb')"')
    if names:
        parts.append(rb'^event:\s*(?:' + _alternatives(names) + rb')\s*$')
    output = re.compile(b"|".join(parts), re.MULTILINE)
    not_output = (re.compile(rb'"type"\s*:\s*"(?:' + _alternatives(not_types) + rb')"')
                  if not_types else None)
    item_added = re.compile(rb'"type"\s*:\s*"response\.output_item\.added"') if items else None
    call_item = (re.compile(rb'"type"\s*:\s*"(?:' + _alternatives(items) + rb')"')
                 if items else None)

    def is_output(event: bytes) -> bool:
        """Whether one event's bytes carry output: content, reasoning, or a tool call."""
        if item_added is not None and item_added.search(event):
            return call_item.search(event, event.find(b'"item"')) is not None  # type: ignore[union-attr]
        if not_output is not None and not_output.search(event):
            return False
        return output.search(event) is not None

    return is_output
