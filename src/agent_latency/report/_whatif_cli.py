"""``agent-latency whatif``: project recorded tasks under faster models, networks or tools."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from ..budget import Scenario, project
from ..budget._whatif import PRESETS
from . import DEFAULT_FILE, TraceFileError, load_tasks, render_projection
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
)
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


def build_parser() -> argparse.ArgumentParser:
    """The ``whatif`` command line."""
    p = OneLineParser(
        prog=_PROG,
        description="Project each recorded task's wall time under changes, keeping the "
                    "recorded order of work (parallel work is not double-saved).",
        epilog="Presets: " + "; ".join(f"{name}: {text} ({', '.join(notes)})"
                                        for name, (text, _, notes) in PRESETS.items()))
    add_source_arguments(p, DEFAULT_FILE)
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
    if tools is not None:
        parts.append(f"tools ÷ {tools}")
    return scenario, ", ".join(parts) or "no change"


def main(argv: list[str]) -> int:
    """``agent-latency whatif``."""
    args = build_parser().parse_args(join_signed_values(list(argv)))
    replace_unencodable(sys.stdout)
    try:
        scenario, described = scenario_from(args)
    except ValueError as exc:
        return fail(_PROG, str(exc))
    try:
        paths, _ = source_paths(args.sources, DEFAULT_FILE)
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
        seen = {iv.name for task in tasks for iv in task.intervals
                if iv.phase == "tool" and iv.name}
        unknown = sorted(set(scenario.tool_speedup) - seen)
        if unknown:
            return fail(_PROG, f"--tool-speedup names {', '.join(map(repr, unknown))}, not a "
                        f"tool of the tasks in {names}; tools seen: "
                        f"{', '.join(sorted(seen)) or 'none'}")
    for task in tasks:
        projection = project(task.intervals, task.span.start_ns, task.span.end_ns, scenario)
        if args.json:
            print(json.dumps({"task": task.name, "trace_id": task.span.trace_id,
                              "scenario": described,
                              "recorded_wall": projection.recorded_wall,
                              "projected_wall": projection.projected_wall,
                              "llm_calls": projection.llm_calls,
                              "client_bound_calls": projection.client_bound,
                              "client_kept": projection.client_kept}))
        else:
            render_projection(task.name, described, projection)
    return BAD_INPUT if problems else 0
