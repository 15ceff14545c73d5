"""``agent-latency compare A B``: two sets of runs of the same tasks, compared per task and
per component with confidence intervals (the method: ``report/_compare.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import semconv
from .._help import wrapped
from ._cli import add_trace_url_argument, say, source_paths
from ._compare import DEFAULT_MIN_EFFECT, compare_tasks, render_comparison
from ._files import default_file
from ._load import load_tasks
from ._read import StoredSpan, TraceFileError
from ._tasks import StoredTask
from ._text import replace_unencodable

_PROG = "agent-latency compare"


def build_parser() -> argparse.ArgumentParser:
    """The ``compare`` command line."""
    p = argparse.ArgumentParser(
        prog=_PROG,
        # The description and epilog are printed as they are: "%" is one percent sign.
        description=wrapped(
            "Compare two sets of runs of the same tasks (files, directories or backend URLs, "
            "as agent-latency report reads them): per task name, for the wall time, each "
            "component and the first token, the medians, B − A, a 95 % confidence interval "
            "(Hodges-Lehmann / Mann-Whitney) and whether it is significant.\n\n"
            "At least 5 runs a side are needed for a useful interval: agent-latency demo "
            "--dir DIR adds a run to DIR each time."),
        epilog="examples:\n"
               "  agent-latency compare before/ after/\n"
               "  agent-latency compare before/ after/ --task fix-tests --html compare.html",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="the baseline runs")
    p.add_argument("b", help="the runs to compare with the baseline")
    p.add_argument("--task", help="only tasks with this name")
    p.add_argument("--min-effect", type=float, default=DEFAULT_MIN_EFFECT * 100,
                   metavar="PCT", help="smallest shift called significant, in %% of A's "
                                       "median (default %(default)g)")
    p.add_argument("--json", action="store_true", help="print one JSON document (schema 1)")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page")
    add_trace_url_argument(p)
    return p


def main(argv: list[str]) -> int:
    """``agent-latency compare``."""
    args = build_parser().parse_args(argv)
    replace_unencodable(sys.stdout)
    sides = []
    first_tokens: dict[Any, list[float]] = {}

    def on_span(task: StoredTask, span: StoredSpan, kind: str, _nested: bool) -> None:
        ttft = span.attributes.get(semconv.LLM_TTFT) if kind == "llm" else None
        if isinstance(ttft, (int, float)):
            first_tokens.setdefault(task.key, []).append(float(ttft))

    for source in (args.a, args.b):
        try:
            # As `report` reads a SOURCE: a directory's trace files, rotated ones included.
            paths, _ = source_paths([source], default_file())
            tasks, problems = load_tasks(paths, args.task, on_span=on_span)
        except TraceFileError as exc:
            say(_PROG, str(exc))
            return 2
        for problem in problems:
            say(_PROG, problem)
        if not tasks:
            say(_PROG, f"no tasks in {source}" + (f" named {args.task!r}" if args.task else ""))
            return 2
        sides.append(tasks)
    comparison = compare_tasks(sides[0], sides[1], min_effect=args.min_effect / 100,
                               first_tokens=first_tokens)
    if not comparison.tasks:
        say(_PROG, "no task name is in both sets of runs "
            f"(A: {', '.join(sorted(comparison.only_a))}; B: "
            f"{', '.join(sorted(comparison.only_b))})")
        return 2
    if args.html:
        # jinja2 (the [report] extra) only for --html.
        from ._html import write_compare_page

        write_compare_page(args.html, comparison, sides[0], sides[1], args.a, args.b,
                           trace_url=args.trace_url)
    if args.json:
        print(json.dumps(comparison.as_dict(args.a, args.b)))
    else:
        render_comparison(comparison, sys.stdout)  # its warnings included, each once
    return 0
