"""Reading our environment variables: one parser for booleans and one for numbers."""

from __future__ import annotations

import os

from ._log import warn_once
from .semconv import ENV_CAPTURE_MESSAGE_CONTENT

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def env_flag(name: str, default: bool) -> bool:
    """A boolean variable (``1/true/yes/on``, ``0/false/no/off``); anything else keeps the
    default, with one warning."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    warn_once(f"env-{name}", "agent-latency: %s=%r is not a boolean; using %s", name, raw,
              default)
    return default


def env_number(name: str, default: float) -> float:
    """A positive number; anything else keeps the default, with one warning."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
        if value > 0:
            return value
    except ValueError:
        pass
    warn_once(f"env-{name}", "agent-latency: %s=%r is not a positive number; using %s", name,
              raw, default)
    return default


def capture_content() -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` puts content on spans
    (legacy ``true``, or ``SPAN_ONLY`` / ``SPAN_AND_EVENT``)."""
    raw = os.environ.get(ENV_CAPTURE_MESSAGE_CONTENT, "")
    return raw.strip().lower() in {"1", "true", "yes", "on", "span_only", "span_and_event"}
