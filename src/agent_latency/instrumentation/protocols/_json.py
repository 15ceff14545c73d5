"""JSON read like an SDK's models, so one reader serves an SDK's objects and the wire's bytes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=256)
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class Json:
    """A JSON object read like an SDK model: ``obj.field`` (None when absent; a field's
    ``camelCase`` spelling for its ``snake_case`` name, as Gemini and Bedrock write them);
    ``model_extra`` is the object itself (fields an SDK model would not declare)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        data = self._data
        if name == "model_extra":
            return data
        value = data.get(name)
        if value is None and "_" in name:
            value = data.get(_camel(name))
        return view(value)


def view(value: Any) -> Any:
    """``value`` with its objects (and lists of them) readable as :class:`Json`."""
    if isinstance(value, Mapping):
        return Json(value)
    if isinstance(value, list):
        return [view(v) for v in value]
    return value


def event_json(event: bytes) -> Any:
    """The JSON object an event's ``data:`` lines carry, as :class:`Json`, or None."""
    payload = b"\n".join(line[5:].strip() for line in event.split(b"\n")
                         if line.startswith(b"data:"))
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    return Json(data) if isinstance(data, Mapping) else None
