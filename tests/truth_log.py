"""The simulator's truth log in timing tests: a request's record, waited for, and the
tolerance ours is held to."""

from __future__ import annotations

import time
from typing import Any

from machine_load import busy_slack


def truth_of(sim: Any, request_id: str) -> dict[str, Any]:
    """The finished request's truth record (the server writes it just after the response)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for record in sim.truth:
            if record["request_id"] == request_id and record.get("last_token_at_mono"):
                return record
        time.sleep(0.05)
    raise AssertionError(f"no truth for {request_id}")


def received_at(record: dict[str, Any]) -> float:
    """When the request's last byte reached the server: the server time a client measures
    (prefill included) starts there, not at ``started_at``, after the server parsed the
    request (milliseconds later: 2-9 ms here for a first call's 8 kB request, counted as
    our error before)."""
    at = record.get("received_at_mono")
    return float(at if at is not None else record["started_at_mono"])


def server_prefill(record: dict[str, Any]) -> tuple[float, float]:
    """A streamed request's server time to its first token, as a client measures it: from
    the request's last byte's arrival to the first token's write, which began at the first
    figure and returned at the second; its bytes left in between (a loaded machine can
    hold the server there for milliseconds: 4.6 ms here beside two busy loops)."""
    start = received_at(record)
    return record["first_token_write_mono"] - start, record["first_token_at_mono"] - start


def close_to(ours: float, window: tuple[float, float]) -> bool:
    """:func:`close` to the nearest end of ``window`` (inside it: exact)."""
    low, high = window
    nearest = min(max(ours, low), high)
    return close(ours, nearest)


def served(sim: Any, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The truth records once there are ``count`` of them (or the timeout): the server writes
    each just after its response, so a fast client is back before the last is written."""
    deadline = time.monotonic() + timeout
    while len(sim.truth) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    return sim.truth


def close(ours: float, truth: float) -> bool:
    """Within max(10 ms, 5 %) of the truth, plus the slack a busy machine needs."""
    return abs(ours - truth) <= max(0.010, 0.05 * truth) + busy_slack()
