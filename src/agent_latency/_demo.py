"""``agent-latency demo``: the demo coding agent against the simulator, then its budget.

It starts the simulator in a child process (scripted turns that make the agent run shell
commands), runs the demo agent (``examples/demo_agent.py``, shipped inside the package)
under instrumentation, and prints the recorded task's budget and three what-ifs.
``--rtt-ms`` adds network delay: in the kernel when this runs as root with iptables and
netfilterqueue (a real round trip that TCP_INFO sees), otherwise through the simulator's
delaying proxy, whose delay the client cannot tell from server time (it shows as prefill).

The spans go to DIR/traces.jsonl, a directory the demo owns: it marks it as its own and
never writes into a directory that holds traces it did not write (the user's
.agent-latency, say).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

PROG = "agent-latency demo"
#: Written into the demo's output directory: the demo replaces traces only where it finds it.
MARKER = ".agent-latency-demo"
#: Inside the installed package (the wheel copies ``examples/`` there), then the source tree.
_PACKAGED = Path(__file__).resolve().parent / "_examples"
_SOURCE_TREE = Path(__file__).resolve().parents[2] / "examples"

_DESCRIPTION = """\
Run the demo coding agent against the simulator and print its budget and three what-ifs.
The simulator runs in a child process with scripted turns that make the agent run shell
commands; the agent (shipped inside the package) runs instrumented.  --rtt-ms adds network
delay: in the kernel when this runs as root with iptables and netfilterqueue (a real round
trip that the kernel's TCP_INFO sees), otherwise through the simulator's delaying proxy,
whose delay the client cannot tell from server time (it shows as prefill).  The spans go to
DIR/traces.jsonl: the demo marks DIR as its own and refuses a directory holding traces it
did not write."""
EXAMPLES = """examples:
  agent-latency demo
  agent-latency demo --output-tps 1000 --rtt-ms 40
  agent-latency demo --dir /tmp/demo && agent-latency report /tmp/demo"""


def examples_dir() -> Path | None:
    """Where the demo agent and its simulator script are: inside the installed package, or
    the source tree's ``examples/`` (an editable install); None when neither has them."""
    for base in (_PACKAGED, _SOURCE_TREE):
        if (base / "demo_agent.py").is_file() and (
                base / "scripts" / "coding_agent.json").is_file():
            return base
    return None


def claim_directory(out_dir: Path) -> str | None:
    """Make ``out_dir`` the demo's own and clear the demo's previous traces there; the reason
    it cannot be (one line) when it holds traces the demo did not write.

    The marker file records each trace file the demo left (size and modification time):
    a file that is not listed, or has changed since (another program wrote to it), is not
    the demo's, so the directory is refused and nothing is deleted.
    """
    if out_dir.exists() and not out_dir.is_dir():
        return f"{out_dir} exists and is not a directory"
    traces = sorted(out_dir.glob("traces.jsonl*")) if out_dir.is_dir() else []
    left = _recorded(out_dir)
    for path in traces:
        if left.get(path.name) != _fingerprint(path):
            return (f"{out_dir} holds traces the demo did not write ({path.name}); choose "
                    "another --dir (the demo never deletes or writes over traces)")
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in traces:  # the demo's own previous run, unchanged since
        old.unlink()
    record_directory(out_dir)
    return None


def record_directory(out_dir: Path) -> None:
    """Write the marker: the trace files in ``out_dir`` are the demo's."""
    files = {p.name: _fingerprint(p) for p in sorted(out_dir.glob("traces.jsonl*"))}
    (out_dir / MARKER).write_text(json.dumps({
        "written_by": "agent-latency demo: these trace files are replaced on its next run "
                      "while unchanged", "files": files}, indent=1) + "\n")


def _recorded(out_dir: Path) -> dict[str, list[int]]:
    try:
        files = json.loads((out_dir / MARKER).read_text()).get("files", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return files if isinstance(files, dict) else {}


def _fingerprint(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def build_parser() -> argparse.ArgumentParser:
    """The ``demo`` command line."""
    parser = argparse.ArgumentParser(
        prog=PROG, description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    parser.add_argument("--output-tps", type=float, default=150.0, metavar="TPS",
                        help="the simulated model's output tokens/s (default 150)")
    parser.add_argument("--prefill-tps", type=float, default=4000.0, metavar="TPS",
                        help="the simulated model's prefill tokens/s (default 4000)")
    parser.add_argument("--rtt-ms", type=float, default=0.0, metavar="MS",
                        help="network round trip to add, in milliseconds (default 0)")
    parser.add_argument("--dir", default=".agent-latency/demo",
                        help="the demo's own directory for its spans (default "
                             ".agent-latency/demo); one holding other traces is refused")
    return parser


def main(argv: list[str]) -> int:
    """Run the demo; returns the agent's exit status."""
    args = build_parser().parse_args(argv)
    examples = examples_dir()
    if examples is None:
        print(f"{PROG}: the demo agent is missing from this installation "
              f"(looked in {_PACKAGED} and {_SOURCE_TREE}); reinstall agent-latency",
              file=sys.stderr)
        return 2
    missing = [(module, extra) for module, extra in (("aiohttp", "simulator"),
                                                     ("openai", "openai"))
               if importlib.util.find_spec(module) is None]
    if missing:  # the simulator's server and the agent's client: both named at once
        extras = ",".join(extra for _, extra in missing)
        print(f"{PROG}: needs {' and '.join(m for m, _ in missing)} (the [{extras}] "
              f"extra{'s' if len(missing) > 1 else ''}): pip install 'agent-latency[{extras}]'",
              file=sys.stderr)
        return 2
    # When the demo runs: the command line starts without the simulator and the report.
    from .budget import Scenario, project
    from .report import load_tasks, render_budget, render_projection
    from .simulator import SimulatorConfig, SimulatorProcess, kernel_delay_unavailable

    out_dir = Path(args.dir)
    refused = claim_directory(out_dir)
    if refused:
        print(f"{PROG}: {refused}", file=sys.stderr)
        return 2
    traces = out_dir / "traces.jsonl"
    why_not_kernel = kernel_delay_unavailable() if args.rtt_ms > 0 else None
    config = SimulatorConfig(
        port=0, prefill_tps=args.prefill_tps, output_tps=args.output_tps,
        rtt_ms=args.rtt_ms, kernel_delay=args.rtt_ms > 0 and why_not_kernel is None,
        script=str(examples / "scripts" / "coding_agent.json"),
    )
    delay = "none" if args.rtt_ms <= 0 else (
        f"{args.rtt_ms:g} ms in the kernel" if config.kernel_delay else
        f"{args.rtt_ms:g} ms through a proxy ({why_not_kernel}; the client sees it as prefill)")
    print(f"starting the simulator: prefill {args.prefill_tps:g} tok/s, output "
          f"{args.output_tps:g} tok/s, network delay {delay}", file=sys.stderr)
    with SimulatorProcess(config) as sim:
        env = {**os.environ, "OPENAI_BASE_URL": sim.base_url + "/v1",
               "OPENAI_API_KEY": "simulator", "AGENT_LATENCY_DIR": str(out_dir)}
        for key in [k for k in env if k.startswith("OTEL_EXPORTER_OTLP")]:
            env.pop(key)  # the demo's spans go to its own file
        try:
            code = subprocess.call([sys.executable,  # noqa: S603 - our own example file
                                    str(examples / "demo_agent.py")], env=env)
        finally:
            record_directory(out_dir)  # what the agent wrote is the demo's to replace
    if code != 0:
        print(f"{PROG}: the demo agent exited with status {code}", file=sys.stderr)
        return code
    tasks, problems = load_tasks(str(traces))
    for problem in problems:
        print(f"{PROG}: {problem}", file=sys.stderr)
    print()
    for task in tasks:
        assert task.budget is not None  # noqa: S101 - load_tasks gives every task a budget
        render_budget(task.name, task.budget, trace_id=task.span.trace_id)
        for label, scenario in (
            ("a 1,000 tokens/s model", Scenario(output_tps=1000.0)),
            ("a persistent connection", Scenario(persistent_connection=True)),
            ("tools twice as fast", Scenario(tool_speedup=2.0)),
        ):
            render_projection(task.name, label,
                              project(task.intervals, task.span.start_ns, task.span.end_ns,
                                      scenario))
    print(f"\nspans: {traces}  (agent-latency report {out_dir})")
    return 0
