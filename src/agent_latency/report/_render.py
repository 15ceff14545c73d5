"""Terminal rendering of task budgets and what-if projections (rich when installed)."""

from __future__ import annotations

import shutil
import sys
import textwrap
from typing import IO, Any

from ..budget import COMPONENTS, OTHER_PARTS, Budget, Projection
from ._summary import split_words
from ._text import safe_text as _t
from ._times import iso_time

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
    """``(label, share s, % of wall, busy s)`` per component, in report order; prefill is
    labelled as holding server time not split when a call's was."""
    wall = budget.wall or 1.0
    labels = dict(LABELS)
    if budget.counts.get("not_split_calls"):
        labels["prefill"] = "prefill*"
    return [(labels[c], budget.shares[c], 100.0 * budget.shares[c] / wall, budget.busy[c])
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


def split_line(budget: Budget) -> str:
    """Which LLM calls' prefill/output split is not measured (empty when all were)."""
    note = budget.split_note()
    if not note:
        return ""
    if budget.all_server_time_unsplit:
        return ("*prefill is the server's whole time, not split into prefill and output "
                "generation (non-streamed calls); no speed is derived from it")
    if budget.counts.get("not_split_calls"):
        return f"{note} (*prefill holds their server time whole; no speed is derived from it)"
    return f"{note} (the speeds include the estimates)"


def other_parts_line(budget: Budget) -> str:
    """``other``'s parts as one line (empty when the task has no other time)."""
    if budget.shares["other"] <= 0:
        return ""
    parts = budget.other_parts
    line = "other = " + " + ".join(f"{part} {parts[part]:.3f}" for part in OTHER_PARTS) + " s"
    if not budget.other_measured:
        line += " (gc, imports and cpu need the live process: not stored with this task)"
    return line


def render_budget(name: str, budget: Budget, stream: IO[str] | None = None, *,
                  trace_id: str | None = None) -> None:
    """Print one task's budget as a table with a bar per component (and the trace id to
    look it up by, when given)."""
    out = stream or sys.stdout
    console = _console(out)
    title = f"task {_t(name)}: {budget.wall:.3f} s"
    if trace_id:
        # A line of its own: an id is never wrapped, nor a table title squeezed around it.
        title += f"{_TRACE_SEP}trace {_t(trace_id)}"
    if console is None:
        print(title, file=out)
        for label, share, pct, busy in budget_rows(budget):
            print(f"  {label:<18} {share:9.3f} s {pct:6.1f} %  busy {busy:9.3f} s  "
                  f"{_bar(pct)}", file=out)
        print(f"  {counts_line(budget)}", file=out)
        if line := split_line(budget):
            print(f"  {line}", file=out)
        if line := budget.bound_note():
            print(f"  prefill and output generation: {line}", file=out)
        if line := other_parts_line(budget):
            print(f"  {line}", file=out)
        return
    # rich (the [report] extra) only for tables on a terminal.
    from rich.table import Table
    from rich.text import Text

    # Text, not a string: rich would read a name's brackets as markup.  The title is printed
    # on its own, unwrapped: as the table's title it was wrapped to the table's width.
    console.print(Text(title), soft_wrap=True)
    table = Table(show_edge=False)
    table.add_column("component")
    table.add_column("share (s)", justify="right")
    table.add_column("% of wall", justify="right")
    table.add_column("busy (s)", justify="right")
    table.add_column("", min_width=20)
    for label, share, pct, busy in budget_rows(budget):
        table.add_row(label, f"{share:.3f}", f"{pct:.1f}", f"{busy:.3f}", _bar(pct))
    console.print(table)
    if line := other_parts_line(budget):
        console.print(Text(f"  {line}"))
    if line := split_line(budget):
        console.print(Text(f"  {line}"))
    if line := budget.bound_note():
        console.print(Text(f"  prefill and output generation: {line}"))
    # Wrapped between items ourselves: rich would break "61 output | tokens" anywhere.
    for row in wrap_items(counts_line(budget).split(", "), console.width, "  "):
        console.print(Text(row), soft_wrap=True)
    console.print()


def render_projection(name: str, scenario: str, projection: Projection,
                      stream: IO[str] | None = None, *, trace_id: str | None = None) -> None:
    """Print one task's recorded and projected wall time (and its trace id, when given)."""
    out = stream or sys.stdout
    saved = projection.saved
    width = terminal_width()
    line = (f"task {_t(name)}: {projection.recorded_wall:.3f} s recorded -> "
            f"{projection.projected_wall:.3f} s with {scenario} "
            f"({'-' if saved >= 0 else '+'}{abs(saved):.3f} s, {projection.speedup:.2f}x)")
    if trace_id:
        trace = f"trace {_t(trace_id)}"
        fits = len(line) + 2 + len(trace) <= width
        line += f"  {trace}" if fits else f"\n  {trace}"
    print(line, file=out)
    # Said only where the client's pace keeps some of the saving: a change that leaves the
    # model's speed alone (a persistent connection) loses nothing to it.
    if projection.client_bound and projection.client_kept >= 0.0005:
        print(textwrap.fill(client_bound_line(projection), width, initial_indent="  ",
                            subsequent_indent="  ", break_long_words=False,
                            break_on_hyphens=False), file=out)


def client_bound_line(projection: Projection) -> str:
    """The what-if's word on a client that is the bottleneck (empty when it is not)."""
    if not projection.client_bound:
        return ""
    return (f"the client is the bottleneck in {projection.client_bound} of "
            f"{projection.llm_calls} LLM calls: it read their streams slower than the "
            f"server sent them, and a faster model does not make it read faster "
            f"(its pace keeps {projection.client_kept:.3f} s of the saving)")


def _bar(pct: float, width: int = 20) -> str:
    filled = max(0, min(width, round(pct / 100 * width)))
    return "█" * filled + "·" * (width - filled)


def _console(out: IO[str]) -> Any:
    try:
        # rich (the [report] extra) only for tables on a terminal.
        from rich.console import Console
    except ImportError:
        return None

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits with status 1 on its own; the command ends closed pipes as the
            # shell expects (cli.closed_pipe), so hand the error up.
            raise BrokenPipeError

    return _Console(file=out, highlight=False)


def _s(value: float | None) -> str:
    """Seconds in a column: 3 significant places, "-" when unknown."""
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _rate(value: float | None, model: dict[str, Any] | None = None) -> str:
    """A speed in a column: "unknown" when calls of the model reported no token counts
    (the speed exists, its tokens are not known), "-" when there is none to give."""
    if value is not None:
        return f"{value:,.0f}"
    return "unknown" if model and model.get("calls_without_usage") else "-"


def _tokens(count: int | None) -> str:
    """A token count in a column of 7: "unknown" when the call reported none."""
    return f"{'unknown' if count is None else format(count, ','):>7}"


def render_summary(summary: Any, source: str, filters: str = "",
                   stream: IO[str] | None = None) -> None:
    """Print the fleet summary: percentiles per task name and across all tasks, per model,
    and the slowest tasks, LLM calls and tools."""
    out = stream or sys.stdout
    data = summary.to_json()
    names = data["by_name"]
    span = ""
    if summary.first_start_ns is not None and summary.last_end_ns is not None:
        span = f", {iso_time(summary.first_start_ns)} to {iso_time(summary.last_end_ns)}"
    print(_t(f"{_count(summary.count, 'task')} ({_count(len(names), 'name')}) from {source}"
             + (f" {filters}" if filters else "") + span), file=out)
    print("\nwall time and its components (s) per task; first token (s) per LLM call",
          file=out)
    width = terminal_width()
    # Labels shrink to fit a narrow terminal ("output generation" needs 17); numbers never.
    lw = max(17, min(24, width - 46))
    header = f"  {'':<{lw}} {'n':>7} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}"
    groups = [("all tasks", data["all"]), *names.items()] if len(names) > 1 else list(
        names.items())
    for title, group in groups:
        print(f"\n{_t(title)} ({_count(group['count'], 'task')})", file=out)
        print(header, file=out)
        rows = [("wall", group["wall"])] + [
            (LABELS[c], group["components"][c]) for c in COMPONENTS] + [
            ("first token", group["first_token"])]
        for label, st in rows:
            print(f"  {label[:lw]:<{lw}} {st['count']:>7,} {_s(st['p50']):>8} "
                  f"{_s(st['p95']):>8} {_s(st['p99']):>8} {_s(st['max']):>8}", file=out)
        if words := split_words(group):
            print(f"  note: {words}", file=out)
    if data["by_model"]:
        # Model names take what the numbers leave (12 to 28 characters).
        mw = max(12, min(28, width - 61))
        print("\nper model (first token in s, speeds in tokens/s, p50)", file=out)
        print(f"  {'model':<{mw}} {'calls':>7} {'first p50':>9} {'p95':>7} {'p99':>7} "
              f"{'output':>9} {'prefill':>9}", file=out)
        for model, m in data["by_model"].items():
            ft = m["first_token"]
            print(f"  {_t(model)[:mw]:<{mw}} {m['calls']:>7,} {_s(ft['p50']):>9} "
                  f"{_s(ft['p95']):>7} {_s(ft['p99']):>7} "
                  f"{_rate(m['output_tokens_per_second']['p50'], m):>9} "
                  f"{_rate(m['prefill_tokens_per_second']['p50'], m):>9}", file=out)
            if words := split_words(m, m["calls"]):
                print(f"    note: {words}", file=out)
    slowest = data["slowest"]
    if slowest["tasks"]:
        print("\nslowest tasks", file=out)
        for t in slowest["tasks"]:
            _fit(out, width, f"  {_s(t['wall']):>8} s  ", _t(t["task"]), f" {t['start']}",
                 f"trace {_t(t['trace_id'])}")
    if slowest["llm_calls"]:
        print("\nslowest LLM calls", file=out)
        for c in slowest["llm_calls"]:
            _fit(out, width, f"  {_s(c['duration']):>8} s  ", _t(c["model"]),
                 f" first token {_s(c['first_token']):>6} s  {_tokens(c['output_tokens'])} "
                 f"out tokens  task {_t(c['task'])[:20]}", f"trace {_t(c['trace_id'])}")
    if slowest["tools"]:
        print("\nslowest tools", file=out)
        for t in slowest["tools"]:
            _fit(out, width, f"  {_s(t['duration']):>8} s  ", _t(t["tool"]),
                 f" task {_t(t['task'])[:20]}", f"trace {_t(t['trace_id'])}")
    print(file=out)


#: Between a budget's title and its trace id.
_TRACE_SEP = "  "
#: A name column is cut to no fewer characters than this to fit the terminal.
_NAME_MIN = 12
_NAME_MAX = 30


def wrap_items(items: list[str], width: int, indent: str) -> list[str]:
    """``items`` joined by ", " into lines of at most ``width`` (an item longer than a line
    gets one of its own): a line never breaks inside an item."""
    lines: list[str] = []
    line = ""
    for item in items:
        candidate = f"{line}, {item}" if line else indent + item
        if line and len(candidate) + 1 > width:  # the comma that ends the line
            lines.append(line + ",")
            candidate = indent + item
        line = candidate
    return [*lines, line] if line else lines


def terminal_width() -> int:
    """The terminal's width in columns (``COLUMNS`` first); unlimited when the output is
    not a terminal, so piped output keeps every name whole."""
    return shutil.get_terminal_size((1_000_000, 24)).columns


def _fit(out: IO[str], width: int, head: str, name: str, rest: str, trace: str) -> None:
    """One row of a slowest list: ``head``, ``name`` in a column cut to fit, ``rest``, then
    the trace id, which goes on a line of its own rather than be broken by the terminal."""
    fixed = len(head) + len(rest)
    column = max(_NAME_MIN, min(_NAME_MAX, width - fixed - 2 - len(trace)))
    line = f"{head}{name[:column]:<{column}}{rest}"
    if len(line) + 2 + len(trace) <= width:
        print(f"{line}  {trace}", file=out)
    else:
        print(line, file=out)
        print(f"{' ' * len(head)}{trace}", file=out)


def _count(n: int, noun: str) -> str:
    """``1 task``, ``12 tasks``."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
