"""``agent-latency demo``: the demo coding agent against the simulator, then its budget.

It starts the simulator in a child process (scripted turns that make the agent run shell
commands), runs ``examples/demo_agent.py`` under instrumentation, and prints the recorded
task's budget and three what-ifs.  ``--rtt-ms`` adds network delay: in the kernel when this
runs as root with iptables and netfilterqueue (a real round trip that ``TCP_INFO`` sees),
otherwise through the simulator's delaying proxy, whose delay the client cannot tell from
server time (it shows as prefill).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def _examples_dir() -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (base / "examples" / "demo_agent.py").exists():
            return base / "examples"
    return None


def main(argv: list[str]) -> int:
    """Run the demo; returns the agent's exit status."""
    parser = argparse.ArgumentParser(prog="agent-latency demo", description=__doc__)
    parser.add_argument("--output-tps", type=float, default=150.0)
    parser.add_argument("--prefill-tps", type=float, default=4000.0)
    parser.add_argument("--rtt-ms", type=float, default=0.0)
    parser.add_argument("--dir", default=".agent-latency/demo",
                        help="where the demo's spans go (default .agent-latency/demo)")
    args = parser.parse_args(argv)
    examples = _examples_dir()
    if examples is None:
        print("agent-latency demo: examples/demo_agent.py not found; run it from the "
              "agent-latency source tree", file=sys.stderr)
        return 2
    from .budget import Scenario, project
    from .report import load_tasks, render_budget, render_projection
    from .simulator import SimulatorConfig, SimulatorProcess, kernel_delay_unavailable

    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    traces = out_dir / "traces.jsonl"
    traces.unlink(missing_ok=True)
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
        # S603: our own interpreter and example file.
        code = subprocess.call([sys.executable, str(examples / "demo_agent.py")],  # noqa: S603
                               env=env)
    if code != 0:
        print(f"agent-latency demo: the demo agent exited with status {code}", file=sys.stderr)
        return code
    tasks, problems = load_tasks(str(traces))
    for problem in problems:
        print(f"agent-latency demo: {problem}", file=sys.stderr)
    print()
    for task in tasks:
        assert task.budget is not None  # noqa: S101 - load_tasks gives every task a budget
        render_budget(task.name, task.budget)
        for label, scenario in (
            ("a 1,000 tokens/s model", Scenario(output_tps=1000.0)),
            ("a persistent connection", Scenario(persistent_connection=True)),
            ("tools twice as fast", Scenario(tool_speedup=2.0)),
        ):
            render_projection(task.name, label,
                              project(task.intervals, task.span.start_ns, task.span.end_ns,
                                      scenario))
    print(f"\nspans: {traces}  (agent-latency report {traces})")
    return 0
