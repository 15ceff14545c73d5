"""Span times checked against a sane range before any budget sees them.

A stored time is whatever its writer put there: an end of 10^40 ns would make a task of
10^31 seconds, a start of 0 one of fifty years.  Spans that start before 2000, end more than
a day after now, or end before they start are left out, and each source (a file, a
backend's URL) gets one problem line, naming the first such span.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Protocol, TypeVar


class _Timed(Protocol):
    """What the check reads of a span (the reader's ``StoredSpan``)."""

    name: str
    start_ns: int
    end_ns: int


Timed = TypeVar("Timed", bound=_Timed)

#: 2000-01-01T00:00:00Z in epoch nanoseconds: nothing this library wrote is older.
EARLIEST_NS = 946_684_800 * 1_000_000_000
#: How far past now a time may lie (hosts' clocks disagree, by far less than this).
AHEAD_NS = 86_400 * 1_000_000_000
#: The words every out-of-range line carries after its source (merged problems drop repeats).
OUT_OF_RANGE = "spans with times out of range left out"


class TimeCheck:
    """Keeps spans whose times are sane; states the first bad one of each source once."""

    __slots__ = ("earliest", "latest", "problems", "_reported")

    def __init__(self, problems: list[str], now_ns: int | None = None) -> None:
        self.earliest = EARLIEST_NS
        self.latest = (time.time_ns() if now_ns is None else now_ns) + AHEAD_NS
        self.problems = problems
        self._reported: set[str] = set()

    def keep(self, spans: list[Timed], source: str, at: str = "") -> list[Timed]:
        """``spans`` less those with times out of range; ``source`` names where they came
        from (one problem line each), ``at`` where in it (``line 12``, a URL)."""
        earliest, latest = self.earliest, self.latest
        for span in spans:
            if not earliest <= span.start_ns <= span.end_ns <= latest:
                break
        else:
            return spans  # the common case: one pass, no copy
        kept = [s for s in spans if earliest <= s.start_ns <= s.end_ns <= latest]
        if source not in self._reported:
            self._reported.add(source)
            first = next(s for s in spans if not earliest <= s.start_ns <= s.end_ns <= latest)
            self.problems.append(
                f"{source}: {OUT_OF_RANGE} (starting before 2000, ending over a day from now, "
                f"or ending before they start); the first{' at ' + at if at else ''}: "
                f"span {first.name!r} {self._why(first)}")
        return kept

    def _why(self, span: _Timed) -> str:
        if span.end_ns < span.start_ns:
            return f"ends {_seconds(span.start_ns - span.end_ns)} before it starts"
        if span.start_ns < self.earliest:
            return f"starts at {_moment(span.start_ns)}"
        return f"ends at {_moment(span.end_ns)}"


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:.6g} s" if ns.bit_length() < 1000 else f"about 10^{_decades(ns) - 9} s"


def _moment(ns: int) -> str:
    """Epoch nanoseconds as an ISO time, or as a power of ten when no calendar holds it."""
    if abs(ns) < 1 << 62:
        text = iso_time(ns)
        if not text.lstrip("-").isdigit():
            return text
    return f"{'-' if ns < 0 else ''}about 10^{_decades(ns)} ns after 1970"


def _decades(ns: int) -> int:
    # math.log10 takes integers of any size (float(ns) would overflow).
    return int(math.log10(abs(ns))) if ns else 0


def drop_repeats(problems: Iterable[str]) -> list[str]:
    """``problems`` with each source's out-of-range line kept once (parts of one file read
    by several processes each state it)."""
    seen: set[str] = set()
    out = []
    for problem in problems:
        source, found, _ = problem.partition(f": {OUT_OF_RANGE}")
        if found:
            if source in seen:
                continue
            seen.add(source)
        out.append(problem)
    return out


def iso_time(ns: int) -> str:
    """Epoch nanoseconds as an ISO 8601 UTC time with milliseconds."""
    try:
        return datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(ns)
