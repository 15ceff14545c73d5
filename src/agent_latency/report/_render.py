"""Terminal rendering of task budgets and what-if projections (rich when installed)."""

from __future__ import annotations

import sys
from typing import IO, Any

from ..budget import COMPONENTS, Budget, Projection

LABELS = {
    "output_generation": "output generation",
    "prefill": "prefill",
    "tool_execution": "tool execution",
    "network_overhead": "network overhead",
    "other": "other",
}
_COUNT_LABELS = (
    ("llm_calls", "LLM calls"), ("tool_calls", "tool calls"),
    ("http_round_trips", "HTTP round trips"), ("new_connections", "new connections"),
    ("tls_handshakes", "TLS handshakes"), ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"), ("subtasks", "nested tasks"),
    ("round_trips", "round trips"), ("ws_messages_sent", "WebSocket messages sent"),
    ("ws_messages_received", "WebSocket messages received"), ("bytes_sent", "bytes up"),
    ("bytes_received", "bytes down"),
)


def budget_rows(budget: Budget) -> list[tuple[str, float, float, float]]:
    """``(label, share s, % of wall, busy s)`` per component, in report order."""
    wall = budget.wall or 1.0
    return [(LABELS[c], budget.shares[c], 100.0 * budget.shares[c] / wall, budget.busy[c])
            for c in COMPONENTS]


def counts_line(budget: Budget) -> str:
    """The non-zero counts and derived speeds as one line."""
    parts = [f"{budget.counts[k]:,} {label}" for k, label in _COUNT_LABELS
             if budget.counts.get(k)]
    trips = budget.counts.get("round_trips")
    if trips:
        reused = 1.0 - budget.counts.get("new_connections", 0) / trips
        parts.append(f"{max(reused, 0.0):.0%} connection reuse")
    if (tps := budget.output_tokens_per_second) is not None:
        parts.append(f"{tps:,.0f} output tok/s")
    if (tps := budget.prefill_tokens_per_second) is not None:
        parts.append(f"{tps:,.0f} prefill tok/s")
    return ", ".join(parts) or "no LLM or tool calls recorded"


def render_budget(name: str, budget: Budget, stream: IO[str] | None = None) -> None:
    """Print one task's budget as a table with a bar per component."""
    out = stream or sys.stdout
    console = _console(out)
    title = f"task {name}: {budget.wall:.3f} s"
    if console is None:
        print(title, file=out)
        for label, share, pct, busy in budget_rows(budget):
            print(f"  {label:<18} {share:9.3f} s {pct:6.1f} %  busy {busy:9.3f} s  "
                  f"{_bar(pct)}", file=out)
        print(f"  {counts_line(budget)}", file=out)
        return
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("component")
    table.add_column("share (s)", justify="right")
    table.add_column("% of wall", justify="right")
    table.add_column("busy (s)", justify="right")
    table.add_column("", min_width=20)
    for label, share, pct, busy in budget_rows(budget):
        table.add_row(label, f"{share:.3f}", f"{pct:.1f}", f"{busy:.3f}", _bar(pct))
    console.print(table)
    console.print(f"  {counts_line(budget)}\n")


def render_projection(name: str, scenario: str, projection: Projection,
                      stream: IO[str] | None = None) -> None:
    """Print one task's recorded and projected wall time."""
    out = stream or sys.stdout
    saved = projection.saved
    print(f"task {name}: {projection.recorded_wall:.3f} s recorded -> "
          f"{projection.projected_wall:.3f} s with {scenario} "
          f"({'-' if saved >= 0 else '+'}{abs(saved):.3f} s, "
          f"{projection.speedup:.2f}x)", file=out)


def _bar(pct: float, width: int = 20) -> str:
    filled = max(0, min(width, round(pct / 100 * width)))
    return "█" * filled + "·" * (width - filled)


def _console(out: IO[str]) -> Any:
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=out, highlight=False)
