"""How loaded the machine is, for wall-clock bounds that must hold on a busy CI box."""

from __future__ import annotations

import os


def busy_slack() -> float:
    """Extra seconds a wall-clock upper bound allows while the machine is busy.

    A lower bound of the simulator's timing is exact (its clock never fires early), an upper
    bound is not: with more runnable processes than cores (a 1-minute load average of at
    least 3/4 of the cores), one wake-up can be tens of milliseconds late. Quiet, 0: the
    tight bound holds.
    """
    cores = os.cpu_count() or 1
    return 0.15 if os.getloadavg()[0] >= 0.75 * cores else 0.0
