"""``agent-latency compare A B``: did B's runs of the same tasks get faster or slower than A's?

Each side is a set of runs (files, directories or backend queries).  For every task name
present on both sides and every metric (wall time and the five components' shares), the
medians of A and B, their difference, and a 95 % confidence interval of the shift B − A:

* **Estimate**: the Hodges-Lehmann shift, the median of the ``n × m`` differences
  ``b_j − a_i``.
* **Interval**: the distribution-free Mann-Whitney interval for that shift, the order
  statistics ``d_(k)`` and ``d_(nm+1−k)`` of the sorted differences, ``k`` from the exact
  distribution of the Mann-Whitney U statistic (normal approximation above 400 pairs).
  Its coverage is at least 95 % (the exact level is reported): no resampling, no seed, the
  same answer every time.
* **Significant** when the interval excludes 0 *and* the estimate is at least
  ``min_effect`` (2 % by default) of A's median and at least ``MIN_EFFECT_S`` (1 ms): a
  shift of a fraction of a percent, or of microseconds, is timer noise on a busy machine,
  even when every run of B happened to be a hair slower.

With fewer than ``MIN_RUNS`` runs on a side the interval is wide or, below 4 runs each,
does not exist at 95 %; the task carries a warning saying so, and is never significant.

The first token is compared too, when both sides have runs with streamed LLM calls: a run's
figure is the median time to first token of its own calls.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..budget import COMPONENTS
from ._tasks import StoredTask
from ._text import safe_text

SCHEMA = 1
METHOD = "hodges-lehmann shift, exact mann-whitney interval"
CONFIDENCE = 0.95
MIN_RUNS = 5
DEFAULT_MIN_EFFECT = 0.02
MIN_EFFECT_S = 0.001

#: The metrics compared, in report order: wall time, then each component's share, then the
#: first token (a run's median time to first token; only runs with streamed calls have one).
FIRST_TOKEN = "first_token"  # noqa: S105 - a metric's key
METRICS = ("wall", *COMPONENTS, FIRST_TOKEN)

# Above this many pairs the exact U distribution is replaced by its normal approximation
# (the exact count table costs O(n·m·nm)).
_EXACT_PAIRS = 400


@dataclass(slots=True)
class Shift:
    """One metric of one task compared: medians, difference, interval, verdict (seconds)."""

    median_a: float
    median_b: float
    estimate: float
    low: float
    high: float
    confidence: float
    significant: bool

    @property
    def difference(self) -> float:
        """``median_b − median_a``: negative when B is faster."""
        return self.median_b - self.median_a

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (infinite bounds as ``null``)."""
        return {
            "median_a": self.median_a, "median_b": self.median_b,
            "difference": self.difference, "estimate": self.estimate,
            "interval": [_finite(self.low), _finite(self.high)],
            "confidence": self.confidence, "significant": self.significant,
        }


@dataclass(slots=True)
class TaskComparison:
    """One task name on both sides: run counts, a warning when too few, and each metric."""

    name: str
    runs_a: int
    runs_b: int
    metrics: dict[str, Shift] = field(default_factory=dict)
    warning: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"task": self.name, "runs_a": self.runs_a, "runs_b": self.runs_b,
                "warning": self.warning,
                "metrics": {k: v.as_dict() for k, v in self.metrics.items()}}


@dataclass(slots=True)
class Comparison:
    """Every task compared, and the task names found on one side only."""

    tasks: list[TaskComparison]
    only_a: dict[str, int]
    only_b: dict[str, int]
    min_effect: float

    @property
    def warnings(self) -> list[str]:
        """Human-readable warnings: too few runs, tasks on one side only."""
        return [f"task {t.name!r}: {t.warning}" for t in self.tasks if t.warning] + \
            self.one_side_warnings

    @property
    def one_side_warnings(self) -> list[str]:
        """The warnings about task names on one side only (the others belong to a task's
        table, and are shown there)."""
        return [f"task {name!r}: {runs(n)} in {side} only; not compared"
                for side, names in (("A", self.only_a), ("B", self.only_b))
                for name, n in names.items()]

    def as_dict(self, source_a: str = "", source_b: str = "") -> dict[str, Any]:
        """The versioned JSON document (docs/report.md, "compare")."""
        return {"schema": SCHEMA, "a": source_a, "b": source_b, "method": METHOD,
                "confidence": CONFIDENCE, "min_effect": self.min_effect,
                "tasks": [t.as_dict() for t in self.tasks], "warnings": self.warnings}


def runs(n: int) -> str:
    """``1 run``, ``3 runs``."""
    return f"{n} run{'' if n == 1 else 's'}"


def metric_values(task: StoredTask,
                  first_tokens: Sequence[float] = ()) -> dict[str, float]:
    """A task run's compared metrics, in seconds; ``first_tokens`` are its LLM calls' times
    to first token (the run has a first-token figure only when there is one)."""
    assert task.budget is not None  # noqa: S101 - compared tasks have budgets
    values = {"wall": task.budget.wall, **{c: task.budget.shares[c] for c in COMPONENTS}}
    if first_tokens:
        values[FIRST_TOKEN] = statistics.median(first_tokens)
    return values


def compare_tasks(a: Iterable[StoredTask], b: Iterable[StoredTask], *,
                  min_effect: float = DEFAULT_MIN_EFFECT,
                  first_tokens: Mapping[Any, Sequence[float]] | None = None) -> Comparison:
    """Compare two sets of task runs, grouped by task name (names in A's order).
    ``first_tokens`` maps a task's ``key`` to its LLM calls' times to first token."""
    runs_a, runs_b = _by_name(a, first_tokens or {}), _by_name(b, first_tokens or {})
    tasks = []
    for name, values_a in runs_a.items():
        values_b = runs_b.get(name)
        if values_b is None:
            continue
        result = TaskComparison(name, len(values_a), len(values_b))
        if min(len(values_a), len(values_b)) < MIN_RUNS:
            result.warning = (f"too few runs to say ({len(values_a)} in A, {len(values_b)} in "
                              f"B; at least {MIN_RUNS} each are needed for a useful 95 % "
                              "interval): not significant whatever the medians say")
        for metric in METRICS:
            side_a = [v[metric] for v in values_a if metric in v]
            side_b = [v[metric] for v in values_b if metric in v]
            if side_a and side_b:  # the first token: only where both sides streamed
                result.metrics[metric] = shift(
                    side_a, side_b, min_effect=min_effect,
                    enough=result.warning is None and min(len(side_a), len(side_b)) >= MIN_RUNS)
        tasks.append(result)
    return Comparison(
        tasks,
        only_a={k: len(v) for k, v in runs_a.items() if k not in runs_b},
        only_b={k: len(v) for k, v in runs_b.items() if k not in runs_a},
        min_effect=min_effect)


def shift(a: Sequence[float], b: Sequence[float], *, min_effect: float = DEFAULT_MIN_EFFECT,
          enough: bool = True) -> Shift:
    """Medians, Hodges-Lehmann shift ``b − a`` and its Mann-Whitney interval."""
    differences = sorted(y - x for x in a for y in b)
    estimate = statistics.median(differences)
    k, confidence = mann_whitney_rank(len(a), len(b))
    if k == 0:
        low, high = -math.inf, math.inf
    else:
        low, high = differences[k - 1], differences[len(differences) - k]
    median_a = statistics.median(a)
    excludes_zero = low > 0 or high < 0
    large_enough = abs(estimate) >= max(min_effect * abs(median_a), MIN_EFFECT_S)
    return Shift(median_a, statistics.median(b), estimate, low, high, confidence,
                 significant=enough and excludes_zero and large_enough)


def mann_whitney_rank(n: int, m: int, level: float = CONFIDENCE) -> tuple[int, float]:
    """``(k, achieved confidence)``: the interval is ``[d_(k), d_(nm+1−k)]`` of the sorted
    pairwise differences; ``k`` is the largest with ``P(U ≤ k−1) ≤ (1−level)/2``, 0 when no
    interval at ``level`` exists (too few runs)."""
    alpha = (1 - level) / 2
    pairs = n * m
    if pairs == 0:
        return 0, 0.0
    if pairs > _EXACT_PAIRS:
        z = statistics.NormalDist().inv_cdf(1 - alpha)
        k = math.floor(pairs / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))
        k = max(0, k)
        return k, level if k else 0.0
    counts = _u_counts(n, m)
    total = math.comb(n + m, n)
    cumulative, k = 0, 0
    for u, count in enumerate(counts):
        if (cumulative + count) / total > alpha:
            break
        cumulative += count
        k = u + 1
    return k, (1 - 2 * cumulative / total) if k else 0.0


def _u_counts(n: int, m: int) -> list[int]:
    """How many of the C(n+m, n) orderings give each value of U (0 … n·m): the
    coefficients of the Gaussian binomial, by the recursion f(n, m) = f(n−1, m)·q^m +
    f(n, m−1)."""
    # table[j] holds f(i, j) for the current i.
    table = [[1] for _ in range(m + 1)]
    for _ in range(1, n + 1):
        row = [[1]]
        for j in range(1, m + 1):
            shifted = [0] * j + table[j]  # f(i−1, j)·q^j
            left = row[j - 1]  # f(i, j−1)
            size = max(len(shifted), len(left))
            row.append([(shifted[u] if u < len(shifted) else 0)
                        + (left[u] if u < len(left) else 0) for u in range(size)])
        table = row
    return table[m]


def _by_name(tasks: Iterable[StoredTask], first_tokens: Mapping[Any, Sequence[float]],
             ) -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {}
    for task in tasks:
        if task.budget is not None:
            out.setdefault(task.name, []).append(
                metric_values(task, first_tokens.get(task.key, ())))
    return out


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


LABELS = {"wall": "wall time", "output_generation": "output generation",
          "prefill": "prefill", "tool_execution": "tool execution",
          "network_overhead": "network overhead", "other": "other",
          FIRST_TOKEN: "first token"}


def render_comparison(comparison: Comparison, out: Any) -> None:
    """The comparison as plain text, one table per task."""
    print(f"B − A per task: medians, Hodges-Lehmann shift and its {CONFIDENCE:.0%} "
          f"Mann-Whitney interval (significant: interval excludes 0 and |shift| ≥ "
          f"{comparison.min_effect:.0%} of A's median and ≥ 1 ms)", file=out)
    for task in comparison.tasks:
        print(f"\ntask {safe_text(task.name)}: {runs(task.runs_a)} in A, {task.runs_b} in B",
              file=out)
        if task.warning:
            print(f"  WARNING: {safe_text(task.warning)}", file=out)
        print(f"  {'':<18} {'A median':>10} {'B median':>10} {'B − A':>10}  "
              f"{'95 % interval':<23} verdict", file=out)
        for metric, s in task.metrics.items():
            interval = f"[{_fmt(s.low)}, {_fmt(s.high)}]"
            verdict = ("no significant difference" if not s.significant
                       else "B faster" if s.estimate < 0 else "B slower")
            if s.significant and s.median_a > 0:
                verdict += f" ({s.estimate / s.median_a:+.0%})"
            print(f"  {LABELS[metric]:<18} {s.median_a:10.3f} {s.median_b:10.3f} "
                  f"{s.difference:+10.3f}  {interval:<23} {verdict}", file=out)
    if any(FIRST_TOKEN in task.metrics for task in comparison.tasks):
        print("\n(first token: each run's median time to first token of its streamed LLM "
              "calls)", file=out)
    for warning in comparison.one_side_warnings:
        print(f"\nWARNING: {safe_text(warning)}", file=out)


def _fmt(value: float) -> str:
    return f"{value:+.3f}" if math.isfinite(value) else ("-inf" if value < 0 else "+inf")
