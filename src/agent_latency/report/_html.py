"""``--html FILE``: one self-contained page (no script, no network fetch) for ``report`` and
``compare``.

The page is rendered by Jinja2 from ``templates/`` (autoescaped: task and tool names come
from traces and are untrusted); the charts are inline SVG drawn by the template from
geometry computed here, so the file opens anywhere, offline, with nothing to load:

* a waterfall per task, the slowest first (at most ``MAX_WATERFALLS``, the slowest ones):
  the task, its nested tasks, and each LLM call (split into its phases, laid end to end
  from the call's start as docs/budget.md describes) and tool (nested tools on rows of
  their own), coloured by phase and component, with names a person reads in the legend;
* stacked component bars, one per task (the same slowest first), scaled to the longest;
* percentile tables (p50/p95/p99/max of wall time and each component per task name, and of
  the time to first token per LLM call), the per-model table and the slowest tasks, LLM
  calls and tools, from the report's summary;
* the what-if table (median recorded and projected wall time per task name under a few
  standard scenarios);
* for ``compare``: the comparison table and a waterfall of each side's median run, both on
  one time scale.

A call whose server time was not split into prefill and output generation (non-streamed,
nothing to split it by) is drawn and named as "server time (not split)", and the tables say
how many calls were not split or split by estimate.  With ``--trace-url TEMPLATE`` every
trace id is a link (``{trace_id}`` replaced).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..budget import (
    COMPONENTS,
    SPLIT_BOUND_SHOWN,
    Budget,
    Scenario,
    component_of,
    project,
)
from ._compare import LABELS as METRIC_LABELS
from ._compare import Comparison
from ._render import LABELS, other_parts_line
from ._stats import summarize
from ._summary import split_words
from ._tasks import StoredTask
from ._text import html_finalize

#: Waterfalls drawn at most per page (the rest are listed, with their budgets, in tables).
MAX_WATERFALLS = 500
#: Rows at most per waterfall (calls beyond are merged into one "more" row).
MAX_ROWS = 200
WIDTH = 960
LABEL_WIDTH = 220
ROW_HEIGHT = 16

COMPONENT_COLOURS = {
    "output_generation": "#2e7d32",
    "prefill": "#1565c0",
    "tool_execution": "#6a1b9a",
    "network_overhead": "#ef6c00",
    "other": "#9e9e9e",
}
# Phases of one component in shades of its colour, so a call's phases stay readable.
PHASE_COLOURS = {
    "output_generation": "#2e7d32", "prefill": "#1565c0", "tool": "#6a1b9a",
    "dns": "#ffb74d", "connect": "#ffa726", "tls": "#fb8c00", "upload": "#f57c00",
    "rtt": "#ef6c00", "tail": "#e65100", "network": "#ef6c00",
    "client": "#bdbdbd", "client_tail": "#9e9e9e", "retry": "#757575", "other": "#9e9e9e",
}
#: The legend's and the tooltips' words for each phase (the attribute names are for code).
PHASE_LABELS = {
    "output_generation": "output generation", "prefill": "prefill (with queueing)",
    "server": "server time (not split)", "tool": "tool",
    "dns": "DNS lookup", "connect": "TCP connect", "tls": "TLS handshake",
    "upload": "request upload", "rtt": "round trip", "tail": "response tail (network)",
    "network": "network", "upgrade": "WebSocket upgrade",
    "client": "client before sending", "client_tail": "client after the last byte",
    "retry": "retries and back-off", "other": "other",
}
# A call's server time that nothing split: prefill's colour, lighter (it holds output too).
PHASE_COLOURS["server"] = "#90caf9"
TASK_COLOUR = "#cfd8dc"

#: The what-if table's scenarios: (label, Scenario).
SCENARIOS = (
    ("output 2× faster", Scenario(output_speedup=2.0)),
    ("first token −50 %", Scenario(ttft_reduction=0.5)),
    ("network −50 %", Scenario(network_reduction=0.5)),
    ("persistent connection", Scenario(persistent_connection=True)),
    ("tools 2× faster", Scenario(tool_speedup=2.0)),
)


def _environment() -> Any:
    # The [report] extra: a missing one is one line, not a failed import of the report.
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("agent_latency.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        # Every value shown is made safe first: controls, bidirectional controls (which
        # would reorder the page's numbers) and lone surrogates become visible escapes.
        finalize=html_finalize,
        trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def trace_url_template(text: str) -> str:
    """``--trace-url``'s value checked: an ``http(s)://`` URL with ``{trace_id}`` in it
    (``ValueError`` otherwise: no ``javascript:`` link from the command line)."""
    if "{trace_id}" not in text:
        raise ValueError("--trace-url needs {trace_id} in it, e.g. "
                         "http://localhost:16686/trace/{trace_id}")
    if not text.lower().startswith(("http://", "https://")):
        raise ValueError("--trace-url must start with http:// or https://")
    return text


def _linker(template: str | None) -> Any:
    """``trace id -> URL or None``."""
    if not template:
        return lambda trace_id: None
    return lambda trace_id: template.replace("{trace_id}", quote(str(trace_id), safe=""))


def render_report_page(tasks: Sequence[StoredTask], source: str,
                       problems: Sequence[str] = (), *,
                       summary: Mapping[str, Any] | None = None,
                       trace_url: str | None = None) -> str:
    """The ``report`` page as HTML text.  ``summary`` is the report's summary (its
    ``--json`` ``summary`` member): first-token percentiles, the per-model table and the
    slowest lists come from it.  ``trace_url`` makes trace ids links."""
    link = _linker(trace_url)
    figures = summary or {}
    return _environment().get_template("report.html.j2").render(
        title=f"agent-latency report: {source}", source=source, problems=list(problems),
        models=_models(figures), slowest=_slowest(figures, link), link=link,
        **_common(tasks, figures, link))


def write_report_page(path: str | Path, tasks: Sequence[StoredTask], source: str,
                      problems: Sequence[str] = (), *,
                      summary: Mapping[str, Any] | None = None,
                      trace_url: str | None = None) -> None:
    """Write the ``report`` page to ``path``."""
    Path(path).write_text(render_report_page(tasks, source, problems, summary=summary,
                                             trace_url=trace_url), encoding="utf-8")


def render_compare_page(comparison: Comparison, tasks_a: Sequence[StoredTask],
                        tasks_b: Sequence[StoredTask], source_a: str, source_b: str, *,
                        trace_url: str | None = None) -> str:
    """The ``compare`` page as HTML text; each task's two median runs on one time scale."""
    link = _linker(trace_url)
    rows = []
    for task in comparison.tasks:
        metrics = []
        for metric, s in task.metrics.items():
            verdict = ("no significant difference" if not s.significant
                       else "B faster" if s.estimate < 0 else "B slower")
            metrics.append({"label": METRIC_LABELS[metric], "a": s.median_a, "b": s.median_b,
                            "difference": s.difference, "low": s.low, "high": s.high,
                            "significant": s.significant, "verdict": verdict})
        runs = [run for run in
                (_median_run(tasks_a, task.name), _median_run(tasks_b, task.name))
                if run is not None]
        # One scale for both: the longer run's full width, the shorter one's bars shorter.
        scale = max((run.span.end_ns - run.span.start_ns for run in runs), default=0)
        median_runs = [_waterfall(run, scale_ns=scale, link=link) for run in runs]
        rows.append({"name": task.name, "runs_a": task.runs_a, "runs_b": task.runs_b,
                     "warning": task.warning, "metrics": metrics,
                     "waterfalls": median_runs})
    longest = max((t.budget.wall for t in [*tasks_a, *tasks_b] if t.budget is not None),
                  default=0.0)
    return _environment().get_template("compare.html.j2").render(
        title=f"agent-latency compare: {source_a} vs {source_b}", source_a=source_a,
        source_b=source_b, comparisons=rows, warnings=comparison.one_side_warnings,
        min_effect=comparison.min_effect, components=_legend(),
        phases=_phase_legend(),
        bars_a=_stacked_bars(tasks_a, longest), bars_b=_stacked_bars(tasks_b, longest),
        percentiles_a=_percentiles(tasks_a), percentiles_b=_percentiles(tasks_b))


def write_compare_page(path: str | Path, comparison: Comparison,
                       tasks_a: Sequence[StoredTask], tasks_b: Sequence[StoredTask],
                       source_a: str, source_b: str, *, trace_url: str | None = None) -> None:
    """Write the ``compare`` page to ``path``."""
    Path(path).write_text(render_compare_page(comparison, tasks_a, tasks_b, source_a,
                                              source_b, trace_url=trace_url),
                          encoding="utf-8")


def slowest_first(tasks: Sequence[StoredTask]) -> list[StoredTask]:
    """Tasks with budgets, the slowest first (ties in start order)."""
    budgeted = [t for t in tasks if t.budget is not None]
    return sorted(budgeted, key=lambda t: -_budget(t).wall)


def _common(tasks: Sequence[StoredTask], summary: Mapping[str, Any],
            link: Any) -> dict[str, Any]:
    ranked = slowest_first(tasks)
    shown = ranked[:MAX_WATERFALLS]
    nested = _nested(tasks)
    return {
        "components": _legend(),
        "phases": _phase_legend(),
        "waterfalls": [_waterfall(t, nested.get(id(t), ()), link=link) for t in shown],
        "omitted": len(ranked) - len(shown),
        "bars": _stacked_bars(ranked),
        "percentiles": _percentiles(tasks, summary),
        "whatif": _whatif(tasks),
        "task_count": len(tasks),
    }


def _phase_legend() -> list[dict[str, str]]:
    return [{"phase": PHASE_LABELS.get(p, p.replace("_", " ")), "colour": c}
            for p, c in PHASE_COLOURS.items() if p != "network"]


def _models(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-model table's rows (from the report's summary)."""
    return [{"model": name, "calls": m["calls"], "first_token": m["first_token"],
             "output_tps": m["output_tokens_per_second"]["p50"],
             "prefill_tps": m["prefill_tokens_per_second"]["p50"],
             "input_tokens": m["input_tokens"], "output_tokens": m["output_tokens"],
             "no_usage": m.get("calls_without_usage", 0), "note": split_words(m, m["calls"])}
            for name, m in summary.get("by_model", {}).items()]


def _slowest(summary: Mapping[str, Any], link: Any) -> dict[str, list[dict[str, Any]]]:
    """The slowest tasks, LLM calls and tools (from the report's summary), with links."""
    slowest = summary.get("slowest", {})
    return {kind: [{**row, "url": link(row["trace_id"])} for row in slowest.get(kind, [])]
            for kind in ("tasks", "llm_calls", "tools")}


def _legend() -> list[dict[str, str]]:
    return [{"key": c, "label": LABELS[c], "colour": COMPONENT_COLOURS[c]} for c in COMPONENTS]


def _waterfall(task: StoredTask, nested: Sequence[StoredTask] = (), *, scale_ns: int = 0,
               link: Any = None) -> dict[str, Any]:
    """Rows of one task's waterfall, with x and width in pixels of the plot area, which
    spans the task (or ``scale_ns``, when longer: two waterfalls on one time scale)."""
    assert task.budget is not None  # noqa: S101 - waterfalls are drawn for budgeted tasks
    start, end = task.span.start_ns, task.span.end_ns
    span = max(end - start, scale_ns, 1)
    unsplit = _unsplit_calls(task)
    plot = WIDTH - LABEL_WIDTH - 10

    def x(t: int) -> float:
        return round(LABEL_WIDTH + plot * (min(max(t, start), start + span) - start) / span, 2)

    def bar(a: int, b: int, colour: str, title: str) -> dict[str, Any]:
        left = x(a)
        return {"x": left, "w": max(round(x(b) - left, 2), 0.5), "colour": colour,
                "title": title}

    rows = [{"label": f"task {task.name}", "indent": 0, "bars": [
        bar(start, end, TASK_COLOUR, f"task {task.name}: {(end - start) / 1e9:.3f} s")]}]
    # Calls: an LLM call's phases, or a tool (nested tools have their own name, so their
    # own row under the outermost tool).
    groups: dict[tuple[int, str, bool], list[Any]] = {}
    for interval in task.intervals:
        is_tool = interval.phase == "tool"
        groups.setdefault((interval.call, interval.name, is_tool), []).append(interval)
    nested_tasks = [(t.span.start_ns, t.span.end_ns, t.name) for t in nested]
    entries: list[tuple[int, int, dict[str, Any]]] = []
    for (_, name, is_tool), intervals in groups.items():
        first = min(i.start for i in intervals)
        last = max(i.end for i in intervals)
        if is_tool:
            label = f"tool {name or '?'}"
        elif any(i.phase in ("prefill", "output_generation") for i in intervals):
            label = f"LLM {name or 'call'}"
        else:
            label = f"{component_of(intervals[0].phase).replace('_', ' ')} {name}".strip()
        whole = not is_tool and unsplit(intervals)
        bars = []
        for i in sorted(intervals):
            if i.end <= i.start:
                continue
            phase = "server" if whole and i.phase == "prefill" else i.phase
            words = PHASE_LABELS.get(phase, phase.replace("_", " "))
            bars.append(bar(i.start, i.end, PHASE_COLOURS.get(phase, "#9e9e9e"),
                            f"{label}: {words} {(i.end - i.start) / 1e6:.1f} ms"))
        entries.append((first, -last, {"label": label, "indent": 1, "bars": bars,
                                       "seconds": (last - first) / 1e9}))
    for s, e, name in nested_tasks:
        entries.append((s, -e, {"label": f"task {name}", "indent": 1, "bars": [
            bar(s, e, TASK_COLOUR, f"nested task {name}: {(e - s) / 1e9:.3f} s")]}))
    entries.sort(key=lambda item: (item[0], item[1]))
    more = len(entries) - MAX_ROWS
    rows += [row for _, _, row in entries[:MAX_ROWS]]
    if more > 0:
        rows.append({"label": f"… {more} more calls", "indent": 1, "bars": []})
    for index, row in enumerate(rows):
        row["y"] = 20 + index * ROW_HEIGHT
    ticks = []
    for k in range(6):
        t = start + span * k // 5
        seconds = (t - start) / 1e9
        ticks.append({"x": x(t), "label": f"{seconds * 1000:.0f} ms" if span < 2e9
                      else f"{seconds:.2f} s",
                      # The last label ends at its tick, inside the picture.
                      "anchor": "end" if k == 5 else "middle"})
    budget = task.budget
    labels = dict(LABELS)
    if budget.all_server_time_unsplit:
        labels["prefill"] = "server time (not split)"
    elif budget.counts.get("not_split_calls"):
        labels["prefill"] = "prefill (with server time not split)"
    return {
        "name": task.name, "trace_id": task.span.trace_id, "wall": budget.wall,
        "url": (link or _linker(None))(task.span.trace_id),
        "shares": [{"label": labels[c], "seconds": budget.shares[c],
                    # The split point's bound, after both figures it moves time between.
                    "bound": budget.split_bound if c in ("prefill", "output_generation")
                    and budget.split_bound >= SPLIT_BOUND_SHOWN
                    else 0.0,
                    "pct": 100 * budget.shares[c] / (budget.wall or 1),
                    # The swatch of the bars it names.
                    "colour": PHASE_COLOURS["server"] if (
                        c == "prefill" and budget.all_server_time_unsplit)
                    else COMPONENT_COLOURS[c]} for c in COMPONENTS
                   if not (c == "output_generation" and budget.all_server_time_unsplit)],
        "split_note": "; ".join(note for note in (budget.split_note(), budget.bound_note())
                                if note),
        "other_parts": other_parts_line(budget),
        "rows": rows, "ticks": ticks, "height": 20 + len(rows) * ROW_HEIGHT + 22,
        "width": WIDTH, "label_width": LABEL_WIDTH,
    }


def _unsplit_calls(task: StoredTask) -> Any:
    """``call intervals -> bool``: whether that LLM call's server time was left unsplit.

    Intervals do not carry the split's source; the task's counts do.  When every call of
    the task was unsplit, each is; when some were, a call with prefill and no output
    generation is taken for one (a streamed call with a single output chunk looks the same,
    and is the one case drawn as unsplit wrongly)."""
    budget = _budget(task)
    if not budget.counts.get("not_split_calls"):
        return lambda intervals: False
    if budget.all_server_time_unsplit:
        return lambda intervals: True
    return lambda intervals: (any(i.phase == "prefill" for i in intervals)
                              and not any(i.phase == "output_generation" for i in intervals))


def _nested(tasks: Sequence[StoredTask]) -> dict[int, list[StoredTask]]:
    """The tasks nested directly in each task, by the parent's ``id``."""
    out: dict[int, list[StoredTask]] = {}
    for task in tasks:
        if task.parent is not None:
            out.setdefault(id(task.parent), []).append(task)
    return out


def _budget(task: StoredTask) -> Budget:
    """The budget of a task the caller kept because it has one."""
    budget = task.budget
    assert budget is not None  # noqa: S101 - callers filter on it
    return budget


def _stacked_bars(tasks: Sequence[StoredTask], longest: float | None = None) -> dict[str, Any]:
    """One horizontal bar per task, its components stacked, scaled to the longest task (or
    to ``longest`` seconds: both sides of a comparison on one scale)."""
    tasks = [t for t in tasks if t.budget is not None][:MAX_WATERFALLS]
    longest = longest or max((_budget(t).wall for t in tasks), default=0.0) or 1.0
    plot = WIDTH - LABEL_WIDTH - 70
    rows = []
    for index, task in enumerate(tasks):
        x = float(LABEL_WIDTH)
        segments = []
        for c in COMPONENTS:
            w = plot * _budget(task).shares[c] / longest
            segments.append({"x": round(x, 2), "w": round(w, 2), "colour": COMPONENT_COLOURS[c],
                             "title": f"{task.name}: {LABELS[c]} "
                                      f"{_budget(task).shares[c]:.3f} s"})
            x += w
        rows.append({"label": task.name, "y": 4 + index * ROW_HEIGHT, "segments": segments,
                     "end": round(x + 4, 2), "wall": _budget(task).wall})
    return {"rows": rows, "height": 8 + len(rows) * ROW_HEIGHT, "width": WIDTH}


def _percentiles(tasks: Sequence[StoredTask],
                 summary: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per task name (then all tasks): count and p50/p95/p99/max per metric; with the
    report's ``summary``, the time to first token per LLM call and the calls whose split is
    not measured."""
    figures = summary or {}
    by_name: dict[str, list[StoredTask]] = {}
    for task in tasks:
        if task.budget is not None:
            by_name.setdefault(task.name, []).append(task)
    groups = list(by_name.items())
    if len(groups) > 1:
        groups.append(("all tasks", [t for ts in by_name.values() for t in ts]))
    out = []
    for name, members in groups:
        metrics = [("wall time", [_budget(t).wall for t in members])]
        metrics += [(LABELS[c], [_budget(t).shares[c] for t in members]) for c in COMPONENTS]
        rows = [{"label": label, **summarize(values)} for label, values in metrics]
        group = (figures.get("all") if name == "all tasks" and len(groups) > 1
                 else figures.get("by_name", {}).get(name))
        note = ""
        if group:
            first = group["first_token"]
            rows.append({"label": f"first token (per LLM call, n = {first['count']})",
                         **first})
            note = split_words(group)
        out.append({"name": name, "count": len(members), "rows": rows, "note": note})
    return out


def _whatif(tasks: Sequence[StoredTask]) -> dict[str, Any]:
    """Median recorded and projected wall time per task name and scenario."""
    by_name: dict[str, list[StoredTask]] = {}
    for task in tasks:
        if task.budget is not None and task.intervals:
            by_name.setdefault(task.name, []).append(task)
    rows = []
    for name, members in by_name.items():
        recorded = statistics.median(_budget(t).wall for t in members)
        cells: list[dict[str, float] | None] = []
        for _, scenario in SCENARIOS:
            try:
                projections = [project(t.intervals, t.span.start_ns, t.span.end_ns, scenario)
                               for t in members]
            except ValueError:  # a scenario this task's data cannot answer
                cells.append(None)
                continue
            projected = statistics.median(p.projected_wall for p in projections)
            kept = statistics.median(p.client_kept for p in projections)
            cells.append({"seconds": projected,
                          "pct": 100 * (projected - recorded) / (recorded or 1),
                          "client_kept": kept})
        rows.append({"name": name, "count": len(members), "recorded": recorded,
                     "cells": cells})
    return {"scenarios": [label for label, _ in SCENARIOS], "rows": rows}


def _median_run(tasks: Sequence[StoredTask], name: str) -> StoredTask | None:
    runs = sorted((t for t in tasks if t.name == name and t.budget is not None),
                  key=lambda t: _budget(t).wall)
    return runs[(len(runs) - 1) // 2] if runs else None
