"""``agent-latency demo``: the demo coding agent against the simulator, then its budget.

It starts the simulator in a child process (scripted turns that make the agent run shell
commands), runs the demo agent (``examples/demo_agent.py``, shipped inside the package)
under instrumentation, and prints the recorded task's budget and three what-ifs.
``--rtt-ms`` adds network delay: in the kernel when this runs as root with iptables and
netfilterqueue (a real round trip that TCP_INFO sees), otherwise through the simulator's
delaying proxy, whose delay the client cannot tell from server time (it shows as prefill).

The spans go to DIR/traces.jsonl (default ``.agent-latency/demo``, where ``agent-latency
report`` and ``whatif`` look when the program's own default file does not exist yet), a
directory the demo owns: it marks it as its own and never writes into a directory that holds
traces it did not write (the user's .agent-latency, say).  Each run adds its trace to the
ones before, so repeated demos give ``agent-latency compare`` its runs.  An OTLP endpoint in
the environment gets the spans too, and the service is ``agent-latency-demo`` unless
``OTEL_SERVICE_NAME`` (or ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``) names another.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from . import semconv
from ._local import DEFAULT_DIR, DEMO_SUBDIR

PROG = "agent-latency demo"
#: Written into the demo's output directory: the demo replaces traces only where it finds it.
MARKER = ".agent-latency-demo"
#: ``service.name`` of the demo agent's spans unless the environment names one.
SERVICE_NAME = "agent-latency-demo"
#: Inside the installed package (the wheel copies ``examples/`` there), then the source tree.
_PACKAGED = Path(__file__).resolve().parent / "_examples"
_SOURCE_TREE = Path(__file__).resolve().parents[2] / "examples"

_DESCRIPTION = """\
Run the demo coding agent against the simulator and print its budget and three what-ifs.
The simulator runs in a child process with scripted turns that make the agent run shell
commands; the agent (shipped inside the package) runs instrumented.  --rtt-ms adds network
delay: in the kernel when this runs as root with iptables and netfilterqueue (a real round
trip that the kernel's TCP_INFO sees), otherwise through the simulator's delaying proxy,
whose delay the client cannot tell from server time (it shows as prefill).

The spans go to DIR/traces.jsonl, where agent-latency report and whatif find them by
themselves while .agent-latency/traces.jsonl does not exist.  Each run adds its trace to
the ones before (agent-latency compare needs several runs a side); DIR is marked as the
demo's own, and a directory holding traces the demo did not write is refused.  With
OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set the spans also go
there; their service.name is agent-latency-demo unless OTEL_SERVICE_NAME names another."""
EXAMPLES = """examples:
  agent-latency demo
  agent-latency demo --output-tps 1000 --rtt-ms 40
  agent-latency demo --dir runs/fast --output-tps 1000 && agent-latency report runs/fast
  agent-latency demo --dir runs/slow --output-tps 100 && agent-latency demo --dir runs/slow
  agent-latency compare runs/slow runs/fast"""


def default_demo_dir() -> str:
    """``$AGENT_LATENCY_DIR/demo`` (default ``.agent-latency/demo``)."""
    base = os.environ.get(semconv.ENV_OUTPUT_DIR, "").strip() or DEFAULT_DIR
    return str(Path(base) / DEMO_SUBDIR)


def examples_dir() -> Path | None:
    """Where the demo agent and its simulator script are: inside the installed package, or
    the source tree's ``examples/`` (an editable install); None when neither has them."""
    for base in (_PACKAGED, _SOURCE_TREE):
        if (base / "demo_agent.py").is_file() and (
                base / "scripts" / "coding_agent.json").is_file():
            return base
    return None


def claim_directory(out_dir: Path) -> str | None:
    """Make ``out_dir`` the demo's own (its previous traces there are kept: this run's is
    added to them); the reason it cannot be (one line) when it holds traces the demo did not
    write.

    The marker file records each trace file the demo left (size and modification time):
    a file that is not listed, or has changed since (another program wrote to it), is not
    the demo's, so the directory is refused and nothing is written.
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
    record_directory(out_dir)
    return None


def record_directory(out_dir: Path) -> None:
    """Write the marker: the trace files in ``out_dir`` are the demo's."""
    files = {p.name: _fingerprint(p) for p in sorted(out_dir.glob("traces.jsonl*"))}
    (out_dir / MARKER).write_text(json.dumps({
        "written_by": "agent-latency demo: its next run adds to these trace files while "
                      "they are unchanged", "files": files}, indent=1) + "\n")


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
    parser.add_argument("--dir", default=default_demo_dir(),
                        help="the demo's own directory for its spans (default "
                             "%(default)s); each run adds its trace; one holding other "
                             "traces is refused")
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
    env = agent_environment(dict(os.environ), out_dir)
    if endpoint := otlp_endpoint(env):
        print(f"the spans also go to {endpoint} (OTLP, from the environment)",
              file=sys.stderr)
    started_ns = time.time_ns()
    with SimulatorProcess(config) as sim:
        env.update({"OPENAI_BASE_URL": sim.base_url + "/v1", "OPENAI_API_KEY": "simulator"})
        try:
            code = subprocess.call([sys.executable,  # noqa: S603 - our own example file
                                    str(examples / "demo_agent.py")], env=env)
        finally:
            record_directory(out_dir)  # what the agent wrote is the demo's to add to
    if code != 0:
        print(f"{PROG}: the demo agent exited with status {code}", file=sys.stderr)
        return code
    tasks, problems = load_tasks(str(traces), rotated=True)
    for problem in problems:
        print(f"{PROG}: {problem}", file=sys.stderr)
    print()
    for task in (t for t in tasks if t.span.start_ns >= started_ns):  # this run's only
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
    runs = len({t.span.trace_id for t in tasks})
    print(f"\nspans: {traces}, {runs} run{'' if runs == 1 else 's'} so far "
          f"(agent-latency report {out_dir})")
    return 0


def agent_environment(env: dict[str, str], out_dir: Path) -> dict[str, str]:
    """The demo agent's environment: its spans to ``out_dir/traces.jsonl``, and to the OTLP
    endpoint the environment names (the file too: the demo reads its budget back from it);
    the demo's service name unless one is named."""
    env[semconv.ENV_OUTPUT_DIR] = str(out_dir)
    exporters = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")
                 if n.strip() and n.strip() != "none"]
    if not exporters and otlp_endpoint(env):
        exporters = ["otlp"]
    if exporters:
        env["OTEL_TRACES_EXPORTER"] = ",".join(
            exporters + ([] if "jsonl" in exporters else ["jsonl"]))
    else:  # unset or "none": the local default, the file alone
        env.pop("OTEL_TRACES_EXPORTER", None)
    resource = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    if not env.get("OTEL_SERVICE_NAME", "").strip() and not any(
            item.split("=", 1)[0].strip() == "service.name" for item in resource.split(",")):
        env["OTEL_SERVICE_NAME"] = SERVICE_NAME
    return env


def otlp_endpoint(env: dict[str, str]) -> str | None:
    """The OTLP traces endpoint the environment names (None when it names none)."""
    return (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
            or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or None)
