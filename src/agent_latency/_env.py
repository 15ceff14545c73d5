"""Reading environment variables defensively: booleans, bounded numbers, and the SDK's
batching settings checked before they reach the SDK (which raises on some bad values).

Every parser here returns a usable value: a setting that is not a finite number inside its
range keeps the default, with one warning naming the variable.
"""

from __future__ import annotations

import math
import os
from typing import TypedDict

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


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (case-insensitive); anything else keeps the default, with one
    warning."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in choices:
        return value
    warn_once(f"env-{name}", "agent-latency: %s=%r is not one of %s; using %s", name, raw,
              ", ".join(choices), default)
    return default


def env_number(name: str, default: float, *, minimum: float = 0.0,
               maximum: float = 1e12, allow_minimum: bool = False) -> float:
    """A finite number above ``minimum`` (or equal to it with ``allow_minimum``) and at most
    ``maximum``; anything else (text, ``nan``, ``inf``, out of range) keeps the default, with
    one warning."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value <= maximum and (
            value > minimum or (allow_minimum and value == minimum)):
        return value
    bound = "positive number" if minimum == 0 else f"number above {minimum:g}"
    warn_once(f"env-{name}", "agent-latency: %s=%r is not a %s (at most %g); using %s",
              name, raw, bound, maximum, default)
    return default


def env_int(name: str, default: int, *, minimum: int = 0, maximum: int = 10**9) -> int:
    """A whole number above ``minimum`` and at most ``maximum``, else the default (one
    warning); ``1e4`` is read as 10000, ``2.5`` is not whole and keeps the default."""
    value = env_number(name, float(default), minimum=minimum, maximum=maximum)
    if value != int(value):
        warn_once(f"env-{name}", "agent-latency: %s=%r is not a whole number; using %s",
                  name, os.environ.get(name), default)
        return default
    return int(value)


class BatchSpanSettings(TypedDict):
    """``BatchSpanProcessor``'s keyword arguments, as :func:`batch_span_settings` gives them."""

    max_queue_size: int
    schedule_delay_millis: int
    max_export_batch_size: int
    export_timeout_millis: int


def batch_span_settings() -> BatchSpanSettings:
    """``BatchSpanProcessor``'s arguments from ``OTEL_BSP_*``, each checked: the SDK raises
    ``ValueError`` in its constructor for ``0`` or negative values, so a bad one is replaced
    by the SDK's default here (one warning) and all four are passed explicitly."""
    queue = env_int("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
    batch = env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
    if batch > queue:
        warn_once("env-OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "agent-latency: "
                  "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=%d is above OTEL_BSP_MAX_QUEUE_SIZE=%d; "
                  "using %d", batch, queue, queue)
        batch = queue
    return {
        "max_queue_size": queue,
        "schedule_delay_millis": env_int("OTEL_BSP_SCHEDULE_DELAY", 5000),
        "max_export_batch_size": batch,
        "export_timeout_millis": env_int("OTEL_BSP_EXPORT_TIMEOUT", 30000),
    }


def metric_reader_settings() -> dict[str, float]:
    """``PeriodicExportingMetricReader``'s interval and timeout from
    ``OTEL_METRIC_EXPORT_INTERVAL`` / ``_TIMEOUT`` (milliseconds), each checked."""
    return {
        "export_interval_millis": env_number("OTEL_METRIC_EXPORT_INTERVAL", 60000.0,
                                             maximum=1e10),
        "export_timeout_millis": env_number("OTEL_METRIC_EXPORT_TIMEOUT", 30000.0,
                                            maximum=1e10),
    }


def capture_content() -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` puts content on spans
    (legacy ``true``, or ``SPAN_ONLY`` / ``SPAN_AND_EVENT``)."""
    raw = os.environ.get(ENV_CAPTURE_MESSAGE_CONTENT, "")
    return raw.strip().lower() in {"1", "true", "yes", "on", "span_only", "span_and_event"}
