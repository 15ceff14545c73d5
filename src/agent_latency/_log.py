"""Our logger, and warnings that are said once per process, not once per span."""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger("agent_latency")

_said: set[str] = set()
_lock = threading.Lock()


def _reset_lock_in_child() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_in_child)


def warn_once(key: str, message: str, *args: object) -> None:
    """Log ``message`` at WARNING the first time ``key`` is seen in this process."""
    with _lock:
        if key in _said:
            return
        _said.add(key)
    logger.warning(message, *args)


def internal_error(where: str) -> None:
    """Log an exception raised inside our own code once per place, with its traceback.

    Called from ``except`` blocks that protect the host program: our failure must never
    become the user's.
    """
    with _lock:
        if where in _said:
            return
        _said.add(where)
    logger.exception("agent-latency internal error in %s (further ones are not logged)", where)


# -- fault injection (tests only) -------------------------------------------------------------
class InjectedFault(RuntimeError):
    """Raised inside our own code by :func:`fault` when a test armed that place."""


def _armed_from_environment() -> set[str]:
    raw = os.environ.get("AGENT_LATENCY_FAULT_INJECTION", "")
    return {p.strip() for p in raw.split(",") if p.strip()}


# Places armed for fault injection: empty in production (one truth test per guarded block).
# ``AGENT_LATENCY_FAULT_INJECTION=place,place`` (or ``*``, every place) arms them at import;
# tests may also add to and clear this very set.
FAULTS: set[str] = _armed_from_environment()


def fault(place: str) -> None:
    """Raise :class:`InjectedFault` when ``place`` (or ``*``) is armed.

    Called as ``if FAULTS: fault("place")`` at the start of each block of ours that
    protects the host with ``internal_error(place)``, so a test can prove that a failure
    there never reaches the program.
    """
    if place in FAULTS or "*" in FAULTS:
        raise InjectedFault(place)
