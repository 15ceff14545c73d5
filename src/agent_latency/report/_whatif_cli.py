"""``agent-latency whatif``: project recorded tasks under faster models, networks or tools."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import textwrap
from typing import Any

from .._help import wrapped
from ..budget import Projection, Scenario, project
from ..budget._whatif import PRESETS, preset
from ._cli import (
    BAD_INPUT,
    NOTHING,
    BadInput,
    OneLineParser,
    Progress,
    Selection,
    add_source_arguments,
    fail,
    say,
    source_paths,
    total_size,
    with_services,
)
from ._files import default_file
from ._load import load_tasks
from ._read import TraceFileError
from ._render import render_projection
from ._text import replace_unencodable

_PROG = "agent-latency whatif"
# Options whose value may be written "-50%": argparse would take it for an option.
_SIGNED_OPTIONS = ("--ttft", "--network")
_SIGNED_VALUE = re.compile(r"^-\d")


def _percent(text: str) -> float:
    """A reduction: ``-50%``, ``50%``, ``50`` and ``-50`` all mean −50 %."""
    cleaned = text.strip().rstrip("%").strip()
    if cleaned.startswith("+"):
        raise argparse.ArgumentTypeError(f"{text!r}: only reductions (-P%) can be projected")
    try:
        value = float(cleaned.lstrip("-"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage between 0 and 100")
    return value / 100


def _tool_speedup(text: str) -> tuple[str | None, float]:
    name, sep, factor = text.rpartition("=")
    try:
        return (name if sep else None), float(factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected FACTOR or TOOL=FACTOR") from None


def join_signed_values(argv: list[str]) -> list[str]:
    """``--ttft -50%`` as ``--ttft=-50%``: argparse reads a value starting with ``-`` as an
    option unless it is glued to its option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out.extend(argv[i:])
            break
        if arg in _SIGNED_OPTIONS and i + 1 < len(argv) and _SIGNED_VALUE.match(argv[i + 1]):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


_EPILOG = "\n".join([
    "With no change given, each usual change alone is projected across the tasks, the "
    "largest",
    "saving first.",
    "",
    "presets:",
    *(f"  {name}: {text}" for name, (text, _, _) in PRESETS.items()),
    *(textwrap.fill(note, 88, initial_indent="    - ", subsequent_indent="      ",
                    break_on_hyphens=False)
      for _, (_, _, notes) in PRESETS.items() for note in notes),
    "",
    "examples:",
    "  agent-latency whatif",
    "  agent-latency whatif --output-tps 1000",
    "  agent-latency whatif --persistent-connection --tool-speedup run_shell=2",
    "  agent-latency whatif --preset latency-first --task fix-tests",
])


def build_parser() -> argparse.ArgumentParser:
    """The ``whatif`` command line."""
    p = OneLineParser(
        prog=_PROG,
        description=wrapped(
            "Project each recorded task's wall time under changes, keeping the recorded "
            "order of work (parallel work is not double-saved)."),
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(p, default_file())
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a named set of changes (see below); other options override its "
                        "figures")
    p.add_argument("--output-tps", type=float, help="output tokens/s of the model (= X)")
    p.add_argument("--output-speedup", type=float, help="output tokens/s × K")
    p.add_argument("--prefill-tps", type=float, help="prefill tokens/s (= X)")
    p.add_argument("--prefill-speedup", type=float, help="prefill tokens/s × K")
    p.add_argument("--ttft", type=_percent, metavar="-P%",
                   help="time to first token −P %% (--ttft -50%% or --ttft=-50%%)")
    p.add_argument("--network", type=_percent, metavar="-P%",
                   help="network overhead −P %%")
    p.add_argument("--per-token", type=_percent, metavar="-P%", dest="per_token",
                   help="per-token overhead −P %% (output generation of calls whose rate "
                        "--output-tps does not set)")
    p.add_argument("--persistent-connection", action="store_true", default=None,
                   help="no DNS, TCP connect or TLS per call")
    p.add_argument("--tool-speedup", type=_tool_speedup, action="append", default=[],
                   metavar="[TOOL=]K",
                   help="tool time ÷ K (all tools, or one by name; an unknown name is an "
                        "error listing the tools seen)")
    p.add_argument("--json", action="store_true", help="print projections as JSON lines")
    return p


def scenario_from(args: argparse.Namespace) -> tuple[Scenario, str]:
    """The scenario the arguments describe, and a short description of it."""
    tools: float | dict[str, float] | None = None
    for name, factor in args.tool_speedup:
        if name is None:
            tools = factor
        else:
            tools = dict(tools) if isinstance(tools, dict) else {}
            tools[name] = factor
    fields: dict[str, Any] = dict(PRESETS[args.preset][1]) if args.preset else {}
    given = {
        "output_speedup": args.output_speedup, "output_tps": args.output_tps,
        "prefill_speedup": args.prefill_speedup, "prefill_tps": args.prefill_tps,
        "ttft_reduction": args.ttft, "network_reduction": args.network,
        "per_token_reduction": getattr(args, "per_token", None),
        "persistent_connection": args.persistent_connection, "tool_speedup": tools,
    }
    fields.update({k: v for k, v in given.items() if v is not None})
    scenario = Scenario(**fields)
    parts = [f"preset {args.preset}"] if args.preset else []
    for key, label in (("output_tps", "output tok/s"), ("output_speedup", "output ×"),
                       ("prefill_tps", "prefill tok/s"), ("prefill_speedup", "prefill ×")):
        if fields.get(key) is not None:
            parts.append(f"{label} {fields[key]:g}")
    for key, label in (("ttft_reduction", "first token"), ("network_reduction", "network"),
                       ("per_token_reduction", "per-token")):
        if fields.get(key):
            parts.append(f"{label} -{fields[key]:.0%}")
    if fields.get("persistent_connection"):
        parts.append("persistent connection")
    if isinstance(tools, dict):
        parts.extend(f"{name} ÷ {factor:g}" for name, factor in tools.items())
    elif tools is not None:
        parts.append(f"tools ÷ {tools:g}")
    return scenario, ", ".join(parts) or "no change"


#: With no change given: each of these alone, to show which would help most.
ONE_CHANGE_EACH: tuple[tuple[str, Scenario], ...] = (
    ("output tokens/s ×2", Scenario(output_speedup=2.0)),
    ("prefill tokens/s ×2", Scenario(prefill_speedup=2.0)),
    ("time to first token -50%", Scenario(ttft_reduction=0.5)),
    ("network overhead -50%", Scenario(network_reduction=0.5)),
    ("a persistent connection", Scenario(persistent_connection=True)),
    ("tools twice as fast", Scenario(tool_speedup=2.0)),
    *((f"preset {name}", preset(name)) for name in sorted(PRESETS)),
)


def summary_line(described: str, projections: list[Projection]) -> str:
    """The projections of several tasks in words: total recorded and projected wall time,
    the saving, and its spread per task."""
    recorded = sum(p.recorded_wall for p in projections)
    projected = sum(p.projected_wall for p in projections)
    return (f"{_count(len(projections))}: {recorded:.3f} s recorded -> {projected:.3f} s with "
            f"{described} ({_change(recorded, projected)}){_spread(projections)}")


def _projected(projections: list[Projection]) -> str:
    """``0.521 s (-0.341 s, -40%)``, and the spread per task when there are several."""
    recorded = sum(p.recorded_wall for p in projections)
    projected = sum(p.projected_wall for p in projections)
    return f"{projected:.3f} s ({_change(recorded, projected)}){_spread(projections)}"


def _spread(projections: list[Projection]) -> str:
    if len(projections) < 2:
        return ""
    changes = sorted(_relative(p.recorded_wall, p.projected_wall) for p in projections)
    return (f", per task {_pct(changes[0])} to {_pct(changes[-1])}, median "
            f"{_pct(statistics.median(changes))}")


def _count(n: int) -> str:
    return f"{n:,} task{'' if n == 1 else 's'}"


def _relative(recorded: float, projected: float) -> float:
    return (projected - recorded) / recorded if recorded > 0 else 0.0


def _pct(change: float) -> str:
    return f"{change:+.0%}".replace("+-", "-") if abs(change) >= 0.005 else "±0%"


def _change(recorded: float, projected: float) -> str:
    if abs(projected - recorded) < 0.0005:
        return "no saving"
    return (f"{'-' if projected <= recorded else '+'}{abs(projected - recorded):.3f} s, "
            f"{_pct(_relative(recorded, projected))}")


def unknown_tools(unknown: list[str], seen: dict[str, int], tasks: int, source: str) -> str:
    """The error for ``--tool-speedup NAME=K`` naming tools the tasks do not have: the
    tools they do have (``seen``: name -> recorded ns), and how to speed up the one that
    took longest, or all."""
    named = " and ".join(repr(name) for name in unknown)
    if not seen:
        return (f"--tool-speedup names {named}, but the {_count(tasks)} in {source} ran no "
                "tools: a tool speed-up has nothing to change")
    longest = max(sorted(seen), key=seen.__getitem__)
    return (f"--tool-speedup names {named}, not a tool of the {_count(tasks)} in {source}; "
            f"tools seen: {', '.join(sorted(seen))} (--tool-speedup {longest}=2 halves "
            f"{longest}'s time, --tool-speedup 2 every tool's)")


def main(argv: list[str]) -> int:
    """``agent-latency whatif``."""
    args = build_parser().parse_args(join_signed_values(list(argv)))
    replace_unencodable(sys.stdout)
    try:
        scenario, described = scenario_from(args)
    except ValueError as exc:
        return fail(_PROG, str(exc))
    try:
        paths, note = source_paths(with_services(args.sources, args.service),
                                   default_file())
        if note:
            say(_PROG, note)
        notes: list[str] = []
        tasks, problems = load_tasks(paths, keep_going=args.keep_going,
                                     selection=Selection(args),
                                     progress=Progress(total_size(paths)), notes=notes)
    except TraceFileError as exc:
        return fail(_PROG, str(exc))
    except BadInput as exc:
        return fail(_PROG, f"{exc} (--keep-going reports everything readable)")
    for problem in problems + notes:
        say(_PROG, problem)
    names = ", ".join(str(p) for p in paths)
    if not tasks:
        say(_PROG, f"no tasks in {names}")
        return BAD_INPUT if problems else NOTHING
    if isinstance(scenario.tool_speedup, dict):
        seen: dict[str, int] = {}
        for iv in (iv for task in tasks for iv in task.intervals):
            if iv.phase == "tool" and iv.name:
                seen[iv.name] = seen.get(iv.name, 0) + iv.end - iv.start
        unknown = sorted(set(scenario.tool_speedup) - set(seen))
        if unknown:
            return fail(_PROG, unknown_tools(unknown, seen, len(tasks), names))
    if described == "no change" and not args.json:
        # Nothing asked: each usual change alone, across the tasks, largest saving first.
        rows = [(label, [project(t.intervals, t.span.start_ns, t.span.end_ns, one)
                         for t in tasks]) for label, one in ONE_CHANGE_EACH]
        rows.sort(key=lambda row: sum(p.projected_wall for p in row[1]))
        recorded = sum(t.budget.wall for t in tasks if t.budget is not None)
        print(f"{_count(len(tasks))}, {recorded:.3f} s recorded; no change given, so each "
              "of these alone:")
        width = max(len(label) for label, _ in rows)
        for label, projections in rows:
            print(f"  {label:<{width}}  -> {_projected(projections)}")
        print(f"(choose changes with the options in {_PROG} --help)")
        return BAD_INPUT if problems else 0
    projections = []
    for task in tasks:
        projection = project(task.intervals, task.span.start_ns, task.span.end_ns, scenario)
        projections.append(projection)
        if args.json:
            print(json.dumps({"task": task.name, "trace_id": task.span.trace_id,
                              "scenario": described,
                              "recorded_wall": projection.recorded_wall,
                              "projected_wall": projection.projected_wall,
                              "llm_calls": projection.llm_calls,
                              "client_bound_calls": projection.client_bound,
                              "client_kept": projection.client_kept}))
        else:
            render_projection(task.name, described, projection,
                              trace_id=task.span.trace_id)
    if not args.json:
        print(f"\nin all, {summary_line(described, projections)}")
    return BAD_INPUT if problems else 0
