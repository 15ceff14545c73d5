"""What one owner's or setup's socket operations add up to: :class:`NetPhases`.

A leaf: the current-call context (which names it in the owner's protocol) and the socket
wrappers (which fill it) both import it from here.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any


class NetPhases:
    """Socket-level durations (seconds) and counts seen while one owner or setup ran."""

    __slots__ = ("connect", "connects", "dns", "last_sock", "t_first", "t_last", "tls",
                 "tls_handshakes")

    def __init__(self) -> None:
        self.dns = self.connect = self.tls = 0.0
        self.connects = self.tls_handshakes = 0
        self.last_sock: Any = None  # the last socket connected (for TCP_INFO)
        # When the first operation recorded here started and the last one ended.
        self.t_first: float | None = None
        self.t_last = 0.0

    def mark(self, t_start: float, t_end: float) -> None:
        """One operation ran from ``t_start`` to ``t_end``."""
        if self.t_first is None:
            self.t_first = t_start
        self.t_last = t_end

    def resolved(self, t_start: float) -> None:
        """A name lookup that started at ``t_start`` ended now."""
        now = perf_counter()
        self.dns += now - t_start
        self.mark(t_start, now)

    def connected(self, t_start: float, sock: Any) -> None:
        """A TCP connect of ``sock`` that started at ``t_start`` ended now."""
        now = perf_counter()
        self.connect += now - t_start
        self.mark(t_start, now)
        self.connects += 1
        self.last_sock = sock

    def handshaken(self, t_start: float) -> None:
        """A TLS handshake that started at ``t_start`` ended now."""
        now = perf_counter()
        self.tls += now - t_start
        self.mark(t_start, now)
        self.tls_handshakes += 1
