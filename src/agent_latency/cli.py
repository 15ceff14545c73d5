"""``agent-latency run|simulate|demo|report|whatif|compare``.

Each subcommand lives in its own module and takes the rest of the command line, so this file
only dispatches; ``python -m agent_latency`` is the same program.  A command that needs an
optional dependency the installation lacks (the simulator's aiohttp, the HTML page's jinja2,
an integration's SDK) says in one line which extra installs it, with exit status 2.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

# subcommand -> (module, one-line help).  The module has ``main(argv: list[str]) -> int``.
COMMANDS = {
    "run": ("agent_latency._run", "run a Python program with everything instrumented"),
    "simulate": ("agent_latency.simulator", "serve a local OpenAI/Anthropic-compatible LLM"),
    "demo": ("agent_latency._demo", "run the demo agent against the simulator"),
    "report": ("agent_latency.report", "show task budgets from a trace file"),
    "whatif": ("agent_latency.report._whatif_cli", "project a recorded task under changes"),
    "compare": ("agent_latency.report._compare_cli",
                "compare two sets of runs: medians, 95 % intervals, significance"),
}

USAGE = ("usage: agent-latency COMMAND [OPTIONS...]\n\ncommands:\n" + "\n".join(
    f"  {name:<9} {text}" for name, (_, text) in COMMANDS.items())
    + "\n\nagent-latency COMMAND --help describes one command.\n\nexamples:\n"
    "  agent-latency demo\n"
    "  agent-latency run -- python agent.py\n"
    "  agent-latency report --tasks")

#: Top-level module of an optional dependency -> the extra that installs it (pyproject.toml's
#: [project.optional-dependencies]; tests/test_command_line.py checks every extra is here).
EXTRAS = {
    "aiohttp": "simulator",
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google-genai",
    "litellm": "litellm",
    "mcp": "mcp",
    "agents": "agents",
    "langchain_core": "langchain",
    "pydantic_ai": "pydantic-ai",
    "dspy": "dspy",
    "agno": "agno",
    "llama_index": "llama-index",
    "crewai": "crewai",
    "haystack": "haystack",
    "rich": "report",
    "jinja2": "report",
    "opentelemetry.exporter.prometheus": "prometheus",
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agent-latency`` command."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(USAGE)
        return 0 if args else 2
    if args[0] in {"-V", "--version"}:
        # Only for --version: the command line imports a subcommand's module alone.
        from ._version import __version__

        print(f"agent-latency {__version__}")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        print(f"agent-latency: unknown command {args[0]!r} (commands: {', '.join(COMMANDS)}; "
              "see agent-latency --help)", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(command[0])
        status = int(module.main(args[1:]) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
    except BrokenPipeError:
        return closed_pipe()
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc.name)
        if extra is None:
            raise  # not an optional dependency: a bug, whose traceback is wanted
        print(f"agent-latency {args[0]}: needs {extra[0]} (the [{extra[1]}] extra): "
              f"pip install 'agent-latency[{extra[1]}]'", file=sys.stderr)
        return 2
    return status


def missing_extra(module: str | None) -> tuple[str, str] | None:
    """``(distribution module, extra)`` for a missing module that an extra of ours installs
    (``google.genai`` -> ``("google.genai", "google-genai")``); None for any other module."""
    name = module or ""
    for prefix, extra in EXTRAS.items():
        if name == prefix or name.startswith(prefix + "."):
            # The dotted prefix names the package better than its first part ("google").
            shown = name if prefix == "google" else prefix
            return shown, extra
    return None


def closed_pipe() -> int:
    """The reader of our output went away (``agent-latency report | head``): end quietly.

    Python's default is a ``BrokenPipeError`` traceback and, at exit, another one while
    flushing.  Instead stdout is pointed at ``/dev/null`` (so the final flush succeeds) and
    the status is 141 (128 + SIGPIPE), what the shell reports for a program killed by the
    pipe closing (``yes | head``); ``set -o pipefail`` scripts see it, others see ``head``'s
    0.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 128 + int(getattr(signal, "SIGPIPE", 13))


if __name__ == "__main__":
    sys.exit(main())
