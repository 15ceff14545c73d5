"""Fixtures: simulators on free loopback ports, stopped after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from machine_load import busy_slack

from agent_latency.simulator import Simulator, SimulatorConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SCRIPT = ROOT / "examples" / "scripts" / "coding_agent.json"

# fast rates keep the suite quick; timing tests ask for slower ones explicitly
FAST = SimulatorConfig(port=0, prefill_tps=1_000_000.0, output_tps=20_000.0)


def near(value: float, nominal: float, tol: float) -> bool:
    """``value`` within ``tol`` of ``nominal``, widened by :func:`busy_slack` (a duration
    between two wake-ups can be long or short by one late wake-up)."""
    return abs(value - nominal) <= tol + busy_slack()


@pytest.fixture
def make_sim() -> Iterator[Callable[..., Simulator]]:
    """Start simulators with ``FAST`` defaults overridden by keyword arguments."""
    started: list[Simulator] = []

    def make(**overrides: object) -> Simulator:
        sim = Simulator(FAST, **overrides).start()
        started.append(sim)
        return sim

    yield make
    for sim in started:
        sim.stop()


@pytest.fixture
def sim(make_sim: Callable[..., Simulator]) -> Simulator:
    """One fast simulator with default settings."""
    return make_sim()


@pytest.fixture
def openai_client(sim: Simulator):  # type: ignore[no-untyped-def]
    """An ``openai.OpenAI`` client pointed at ``sim`` (no retries)."""
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)


@pytest.fixture
def anthropic_client(sim: Simulator):  # type: ignore[no-untyped-def]
    """An ``anthropic.Anthropic`` client pointed at ``sim`` (no retries)."""
    anthropic = pytest.importorskip("anthropic")
    return anthropic.Anthropic(base_url=sim.base_url, api_key="sk-test", max_retries=0)


USER = [{"role": "user", "content": "hello there"}]
CHAT_TOOLS = [{"type": "function", "function": {
    "name": "run_shell", "description": "Run a shell command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}]
RESPONSES_TOOLS = [{"type": "function", "name": "run_shell", "description": "Run a command",
                    "parameters": CHAT_TOOLS[0]["function"]["parameters"]}]
ANTHROPIC_TOOLS = [{"name": "run_shell", "description": "Run a shell command",
                    "input_schema": CHAT_TOOLS[0]["function"]["parameters"]}]
TOOL_SCRIPT = {"turns": [{"content": "Checking.", "tool_calls": [
    {"name": "run_shell", "arguments": {"command": "ls"}}]}, {"content": "All done."}]}
