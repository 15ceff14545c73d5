"""Percentiles and summaries of many tasks' figures: pure, standard library only.

Percentile definition: linear interpolation between the closest ranks, the same as numpy's
default (``method="linear"``, Hyndman & Fan type 7) and Python's
``statistics.quantiles(..., method="inclusive")``: for sorted values ``x[0..n-1]`` the
``q``-th percentile is at rank ``h = (n - 1) * q / 100``, i.e.
``x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])``.  With one value every
percentile is that value; with none it is ``None``.

The per-task record the report works on (``report/_tasks.py``: :class:`StoredTask`)::

    StoredTask
      .span       StoredSpan of the task (trace_id, span_id, parent_id, name, start_ns,
                  end_ns, attributes: only agent_latency.* and gen_ai.* are kept)
      .name       agent_latency.task.name (or the span name)
      .intervals  list[budget.Interval] (start_ns, end_ns, phase, call, tokens, name):
                  every busy stretch under the task, nested tasks' included
      .counts     {"llm_calls", "tool_calls", "http_round_trips", "new_connections",
                   "tls_handshakes", "input_tokens", "output_tokens", "subtasks": int}
      .budget     budget.Budget: wall (s), shares {component: s} adding up to wall,
                  busy {component: s}, counts (as above), output/prefill tokens per second
      .parent     the enclosing StoredTask, or None

Components are ``budget.COMPONENTS``: output_generation, prefill, tool_execution,
network_overhead, other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: The percentiles a summary reports, and their keys.
PERCENTILES = ((50, "p50"), (95, "p95"), (99, "p99"))


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) of ``values`` by linear interpolation between closest
    ranks (numpy's default); ``None`` for no values.  NaN values are ignored."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q!r} is outside 0..100")
    ordered = sorted(v for v in values if not math.isnan(v))
    return _sorted_percentile(ordered, q)


def _sorted_percentile(ordered: Sequence[float], q: float) -> float | None:
    n = len(ordered)
    if n == 0:
        return None
    rank = (n - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, n - 1)
    fraction = rank - low
    if fraction == 0 or ordered[low] == ordered[high]:
        return float(ordered[low])
    return ordered[low] + fraction * (ordered[high] - ordered[low])


def summarize(values: Iterable[float]) -> dict[str, float | int | None]:
    """``count``, ``p50``, ``p95``, ``p99``, ``max`` and ``mean`` of ``values`` (NaN
    ignored); every figure but ``count`` is ``None`` when there are no values."""
    ordered = sorted(v for v in values if not math.isnan(v))
    out: dict[str, float | int | None] = {"count": len(ordered)}
    for q, key in PERCENTILES:
        out[key] = _sorted_percentile(ordered, q)
    out["max"] = float(ordered[-1]) if ordered else None
    out["mean"] = _mean(ordered) if ordered else None
    return out


def _mean(values: list[float]) -> float:
    n = len(values)
    try:
        return math.fsum(values) / n
    except OverflowError:
        # Finite values whose sum is beyond a float (a trace's 9e307 tokens/s, twice): summed
        # scaled down by a power of two at least ``n`` and scaled back.  The scaling rounds
        # nothing (only values too small to matter beside these can lose bits), where
        # ``v / n`` rounded up and let three of the largest float overflow again.
        scale = n.bit_length()
        return math.ldexp(math.fsum(math.ldexp(v, -scale) for v in values) / n, scale)
    except ValueError:  # both infinities: no mean
        return math.nan
