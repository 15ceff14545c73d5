"""A protocol's route bound to the endpoint that reads it: the protocols name the SDK layers'
endpoints as ``"module:NAME"`` (the SDK layers read the protocols, so a protocol does not
import them); the wire recogniser and the ``requests`` layer bind them here."""

from __future__ import annotations

import importlib
from functools import lru_cache

from ..protocols import Endpoint, Route, match


@lru_cache(maxsize=64)
def _bound(ref: str) -> Endpoint:
    """An SDK layer's endpoint named ``"module:NAME"`` by a protocol."""
    module, _, name = ref.partition(":")
    endpoint: Endpoint = getattr(importlib.import_module(module), name)
    return endpoint


def endpoint(route: Route) -> Endpoint:
    """The endpoint that reads ``route``'s requests."""
    found = route.endpoint
    return _bound(found) if isinstance(found, str) else found


def endpoint_of(path: str) -> tuple[Endpoint, str, bool] | None:
    """``(endpoint, model named by the path or "", streams by the path)`` for a request
    path, or None when no protocol knows it."""
    found = match(path)
    if found is None:
        return None
    route = found[1]
    return endpoint(route), route.model, route.streams
