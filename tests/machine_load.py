"""How loaded the machine is, for wall-clock bounds that must hold on a busy CI box."""

from __future__ import annotations

import os

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
    milliseconds late.  Busy is a 1-minute load average of at least 3/4 of the cores, or
    CPU pressure: the load average lags a burst by tens of seconds and does not see a
    host's other tenants, the pressure does within 10 s.  Quiet, 0: the tight bound holds.
    """
    cores = os.cpu_count() or 1
    busy = os.getloadavg()[0] >= 0.75 * cores or _cpu_pressure() >= _PRESSURE_BUSY
    return 0.15 if busy else 0.0
