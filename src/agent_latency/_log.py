"""Our logger, and warnings that are said once per process, not once per span."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from ._locks import ForkSafeLock

logger = logging.getLogger("agent_latency")

_P = ParamSpec("_P")
_R = TypeVar("_R")

_said: set[str] = set()
_lock = ForkSafeLock()


def warn_once(key: str, message: str, *args: object) -> None:
    """Log ``message`` at WARNING the first time ``key`` is seen in this process."""
    with _lock:
        if key in _said:
            return
        _said.add(key)
    logger.warning(message, *args)


#: Told of every internal error, not only the first per place (the test suite sets it, so a
#: failure of ours that the program never sees still fails the test that caused it).
on_internal_error: Callable[[str], None] | None = None


def internal_error(where: str) -> None:
    """Log an exception raised inside our own code once per place, with its traceback.

    Called from ``except`` blocks that protect the host program: our failure must never
    become the user's.
    """
    observer = on_internal_error
    if observer is not None:
        observer(where)
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


class Guard:
    """One place of ours that protects the host program, named once.

    As a decorator, ``@Guard("place")`` runs the function so that an exception inside is
    logged (once per place) and swallowed, the function then returning ``default``, and so
    that a test can make it fail where it starts by arming the place (:data:`FAULTS`).
    Where a block is not a whole function, or per chunk where even the decorator's call
    counts, ``try: guard.inject() ... except Exception: guard.report()`` does the same.
    """

    __slots__ = ("default", "place")

    def __init__(self, place: str, default: Any = None) -> None:
        self.place = place
        self.default = default

    def __call__(self, function: Callable[_P, _R]) -> Callable[_P, _R]:
        place, default = self.place, self.default

        @functools.wraps(function)
        def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                if FAULTS:
                    fault(place)
                return function(*args, **kwargs)
            except Exception:  # noqa: BLE001 - our failure must never become the program's
                internal_error(place)
                return default

        return guarded

    def inject(self) -> None:
        """Raise :class:`InjectedFault` when a test armed this place."""
        if FAULTS:
            fault(self.place)

    def report(self) -> None:
        """Log the exception being handled (from an ``except`` block) as this place's."""
        internal_error(self.place)
