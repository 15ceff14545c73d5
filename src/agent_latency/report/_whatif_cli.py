"""``agent-latency whatif``: project recorded tasks under faster models, networks or tools."""

from __future__ import annotations

import argparse
import json
import sys

from ..budget import Scenario, project
from . import DEFAULT_FILE, TraceFileError, load_tasks, render_projection


def _percent(text: str) -> float:
    value = float(text.strip().rstrip("%").lstrip("-"))
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage between 0 and 100")
    return value / 100


def _tool_speedup(text: str) -> tuple[str | None, float]:
    name, sep, factor = text.rpartition("=")
    try:
        return (name if sep else None), float(factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected FACTOR or TOOL=FACTOR") from None


def build_parser() -> argparse.ArgumentParser:
    """The ``whatif`` command line."""
    p = argparse.ArgumentParser(
        prog="agent-latency whatif",
        description="Project each recorded task's wall time under changes, keeping the "
                    "recorded order of work (parallel work is not double-saved).")
    p.add_argument("file", nargs="?",
                   help=f"OTLP/JSON trace file (default {DEFAULT_FILE} and its rotated files)")
    p.add_argument("--task", help="only tasks with this name")
    p.add_argument("--output-tps", type=float, help="output tokens/s of the model (= X)")
    p.add_argument("--output-speedup", type=float, help="output tokens/s × K")
    p.add_argument("--prefill-tps", type=float, help="prefill tokens/s (= X)")
    p.add_argument("--prefill-speedup", type=float, help="prefill tokens/s × K")
    p.add_argument("--ttft", type=_percent, metavar="-P%", help="time to first token −P %%")
    p.add_argument("--network", type=_percent, metavar="-P%",
                   help="network overhead −P %%")
    p.add_argument("--persistent-connection", action="store_true",
                   help="no DNS, TCP connect or TLS per call")
    p.add_argument("--tool-speedup", type=_tool_speedup, action="append", default=[],
                   metavar="[TOOL=]K", help="tool time ÷ K (all tools, or one by name)")
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
    scenario = Scenario(
        output_speedup=args.output_speedup, output_tps=args.output_tps,
        prefill_speedup=args.prefill_speedup, prefill_tps=args.prefill_tps,
        ttft_reduction=args.ttft, network_reduction=args.network,
        persistent_connection=args.persistent_connection, tool_speedup=tools,
    )
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in (
        ("output_tps", args.output_tps), ("output_speedup", args.output_speedup),
        ("prefill_tps", args.prefill_tps), ("prefill_speedup", args.prefill_speedup),
        ("ttft -", args.ttft and f"{args.ttft:.0%}"),
        ("network -", args.network and f"{args.network:.0%}")) if v]
    if args.persistent_connection:
        parts.append("persistent connection")
    if tools is not None:
        parts.append(f"tools ÷ {tools}")
    return scenario, ", ".join(parts) or "no change"


def main(argv: list[str]) -> int:
    """``agent-latency whatif``."""
    args = build_parser().parse_args(argv)
    try:
        scenario, described = scenario_from(args)
        tasks, problems = load_tasks(args.file or DEFAULT_FILE, args.task,
                                     rotated=args.file is None)
    except (TraceFileError, ValueError) as exc:
        print(f"agent-latency whatif: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"agent-latency whatif: {problem}", file=sys.stderr)
    if not tasks:
        print(f"agent-latency whatif: no tasks in {args.file or DEFAULT_FILE}",
              file=sys.stderr)
        return 1
    for task in tasks:
        projection = project(task.intervals, task.span.start_ns, task.span.end_ns, scenario)
        if args.json:
            print(json.dumps({"task": task.name, "scenario": described,
                              "recorded_wall": projection.recorded_wall,
                              "projected_wall": projection.projected_wall}))
        else:
            render_projection(task.name, described, projection)
    return 0
