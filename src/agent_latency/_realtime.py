"""CLOCK_REALTIME against ``perf_counter``: the kernel dates packets on the one, the
budget is measured on the other."""

from __future__ import annotations

import time

# A bracket this narrow was not interrupted: its offset is as good as the clocks' resolution.
_TIGHT_S = 20e-6


def realtime_offset(tries: int = 8) -> float:
    """CLOCK_REALTIME less ``perf_counter``, in seconds, from the tightest of up to ``tries``
    pairs read.  Each pair is bracketed by two ``perf_counter`` reads: the GIL can go to
    another thread between two calls, and the OS can take the CPU there, so a single pair
    can be off by however long that lasted (CI: 146 ms, every stamp of the next minute as
    late).  A bracket of a few microseconds was not interrupted."""
    best, offset = float("inf"), 0.0
    for _ in range(tries):
        before = time.perf_counter()
        realtime = time.time_ns() / 1e9
        after = time.perf_counter()
        if after - before < best:
            best, offset = after - before, realtime - (before + after) / 2
            if best < _TIGHT_S:
                break
    return offset
