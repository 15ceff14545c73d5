"""Arrival times on demand: an owner asks for them on one attempt's connection while it needs
them (until a stream's first output token, or while its client is busy), and stops."""

from __future__ import annotations

from typing import Any

from ._arrivals import Arrivals
from ._taps import Untap, tap
from ._watcher import WATCHER


class Following:
    """Arrival times being taken on one connection: its :class:`Arrivals`, the tap on its
    reads and, on request, the watcher."""

    __slots__ = ("arrivals", "untap")

    def __init__(self, arrivals: Arrivals, untap: Untap) -> None:
        self.arrivals = arrivals
        self.untap: Untap | None = untap

    def watch(self, *, ticks: bool | None = None) -> None:
        """Also stamp arrivals while the reader is away (the watcher thread).  ``ticks``:
        whether the watcher also records quiet moments (while a wait of unknown length, a
        stream's prefill, is on); None leaves it as it was."""
        if ticks is not None:
            self.arrivals.ticked = ticks
        WATCHER.watch(self.arrivals)

    def stop(self) -> None:
        """Untap the reads and stop watching (idempotent)."""
        untap, self.untap = self.untap, None
        if untap is not None:
            untap()
        WATCHER.unwatch(self.arrivals)


def follow(attempt: Any, classify: Any = None,
           arrivals: Arrivals | None = None) -> Following | None:
    """Start taking arrival times on ``attempt``'s connection, or None where its client's
    stream or socket is not one we can tap.  ``classify(event bytes) -> bool`` says which
    events carry output (``Arrivals.outputs``).  ``arrivals``: made already on the same
    socket as the request was written (its transmit stamps)."""
    stream, sock = attempt.stream, attempt.sock
    if stream is None or sock is None:
        return None
    try:
        if sock.fileno() < 0:
            return None
        if arrivals is None or arrivals.sock is not sock:
            arrivals = Arrivals(sock)
        arrivals.classify = classify
    except (OSError, AttributeError, ValueError):
        return None
    untap = tap(stream, arrivals, attempt.holder)
    if untap is None:
        return None
    return Following(arrivals, untap)
