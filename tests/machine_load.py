"""How loaded the machine is, for wall-clock bounds that must hold on a busy CI box."""

from __future__ import annotations

import os
import time

#: Set (to "1") by the suite's conftest in make test's side-by-side phase (``--quiet-tests=skip``):
#: there the suite itself keeps the machine busy, whatever the load average says yet.
SIDE_BY_SIDE_ENV = "AGENT_LATENCY_TESTS_SIDE_BY_SIDE"

#: Share of the last 10 or 60 s (percent) in which some runnable task waited for a CPU,
#: above which the machine counts as busy.
_PRESSURE_BUSY = 10.0


def _cpu_pressure() -> float:
    """The kernel's CPU pressure (``/proc/pressure/cpu``, "some", the larger of its 10 and
    60 s averages), or 0.0 where it is not kept."""
    try:
        with open("/proc/pressure/cpu") as f:
            some = f.readline().split()
        fields = dict(field.split("=", 1) for field in some[1:])
        return max(float(fields["avg10"]), float(fields["avg60"]))
    except (OSError, ValueError, KeyError, IndexError):
        return 0.0


def busy_slack() -> float:
    """Extra seconds a wall-clock upper bound allows while the machine is busy.

    A lower bound of the simulator's timing is exact (its clock never fires early), an upper
    bound is not: with more runnable processes than cores, one wake-up can be tens of
    milliseconds late.  Busy is make test's side-by-side phase (:data:`SIDE_BY_SIDE_ENV`:
    a CI host whose load average and pressure had not caught up yet once failed a 10 ms
    bound by 3 ms there), a 1-minute load average of at least 3/4 of the cores, or CPU
    pressure: the load average lags a burst by tens of seconds and does not see a host's
    other tenants, the pressure does within 10 s.  Quiet, 0: the tight bound holds, as it
    does in the quiet phase, where the tests that pin timing to a few milliseconds run.
    """
    cores = os.cpu_count() or 1
    busy = (os.environ.get(SIDE_BY_SIDE_ENV) == "1"
            or os.getloadavg()[0] >= 0.75 * cores or _cpu_pressure() >= _PRESSURE_BUSY)
    return 0.15 if busy else 0.0


def _machine_busy_seconds() -> float | None:
    """CPU seconds all cores have spent busy since boot (``/proc/stat``: everything but idle
    and iowait, steal included: a host's other tenants), or None where it is not kept."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_seconds(pids: tuple[int, ...]) -> float:
    """CPU seconds of this process and its waited-for children, and of the processes
    ``pids`` (servers the test started: ``/proc/PID/stat``'s utime and stime)."""
    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                # (after the command's parenthesised name: fields 14 and 15 of the line)
                fields = f.read().rsplit(")", 1)[1].split()
            own += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
    return own


class OthersCpu:
    """What the rest of the machine used of the CPUs while a block ran: a test beside it, a
    suite on another Python, a host's other tenant.  ``share`` is their CPU seconds per
    second of the block (0.5: half a core, all along), from the machine's busy time less
    this process's, the children it waited for (a subprocess run inside the block is its
    own, not another's) and ``pids``' (a server the test started); None where the machine's
    counts are not kept.

    A check that holds only on a quiet machine asks this of the whole run: a load sampled
    at the run's ends misses a neighbour that came and went in between."""

    __slots__ = ("_busy", "_own", "_pids", "_wall", "share")

    def __init__(self, pids: tuple[int, ...] = ()) -> None:
        self.share: float | None = None
        self._pids = pids
        self._busy: float | None = None
        self._own = 0.0
        self._wall = 0.0

    def __enter__(self) -> OthersCpu:
        self._busy, self._own = _machine_busy_seconds(), _own_seconds(self._pids)
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy, wall = _machine_busy_seconds(), time.perf_counter() - self._wall
        if busy is None or self._busy is None or wall <= 0:
            return
        others = (busy - self._busy) - (_own_seconds(self._pids) - self._own)
        self.share = max(others, 0.0) / wall
