"""Fault injection: every guarded block of ours is made to raise, one place at a time, and
every instrumented API still returns and raises exactly what it does without us; each
place's failure is logged once.

The switch is ``agent_latency._log.FAULTS`` (``AGENT_LATENCY_FAULT_INJECTION`` in a real
process); empty, it costs one truth test per guarded block.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import agent_latency
from agent_latency import _log
from agent_latency.instrumentation.httpx import HttpxInstrumentor
from agent_latency.instrumentation.llm.anthropic import AnthropicInstrumentor
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
from agent_latency.instrumentation.tools.subprocess import SubprocessInstrumentor
from agent_latency.simulator import Simulator, SimulatorConfig

# Every test here provokes internal errors on purpose.
pytestmark = pytest.mark.internal_errors

SRC = Path(agent_latency.__file__).parent
# Every place armed somewhere in our code (the literal names), plus the scopes' own.
PLACES = sorted({m for path in SRC.rglob("*.py")
                 for m in re.findall(r'(?:fault|Guard)\("([^"]+)"', path.read_text())}
                | {"task.__exit__", "tool.__exit__"})
# Places the scenarios below must reach (the others guard paths they do not take: fork,
# signals, MCP, agent frameworks).
MUST_HIT = {"llm.request", "llm.start", "llm.result", "llm.observe", "llm.finish",
            "llm.stainless_post", "network.trace", "network.atrace", "subprocess._execute_child",
            "subprocess._execute_child.after", "subprocess.finish", "subprocess.os_system",
            "BudgetSpanProcessor.on_start", "BudgetSpanProcessor.on_end",
            "BudgetSpanProcessor.finish_task", "task.__exit__", "tool.__exit__"}
FAST = SimulatorConfig(prefill_tps=20000.0, output_tps=1000.0, default_output_tokens=8)
MESSAGES = [{"role": "user", "content": "hi"}]


def _instrumentors() -> list[Any]:
    return [HttpxInstrumentor(), OpenAIInstrumentor(), AnthropicInstrumentor(),
            SubprocessInstrumentor()]


class Boom(Exception):
    """The program's own exception: must come out unchanged."""


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("returned", fn())
    except Exception as exc:  # noqa: BLE001
        return ("raised", type(exc).__name__, str(exc))


def _scenarios(sim: Simulator) -> dict[str, Callable[[], Any]]:
    def oa() -> openai.OpenAI:
        return openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)

    def aoa() -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)

    def an() -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0)

    def aan() -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="k", max_retries=0)

    def openai_sync() -> Any:
        r = oa().chat.completions.create(model="sim", messages=MESSAGES)
        return type(r).__name__, r.choices[0].message.content, r.usage.completion_tokens

    def openai_sync_stream() -> Any:
        stream = oa().chat.completions.create(model="sim", messages=MESSAGES, stream=True)
        return [c.choices[0].delta.content for c in stream if c.choices]

    def openai_stream_abandoned() -> Any:
        stream = oa().chat.completions.create(model="sim", messages=MESSAGES, stream=True)
        first = next(iter(stream))
        del stream
        return type(first).__name__

    def openai_async() -> Any:
        async def go() -> Any:
            r = await aoa().chat.completions.create(model="sim", messages=MESSAGES)
            return r.choices[0].message.content
        return asyncio.run(go())

    def openai_async_stream() -> Any:
        async def go() -> Any:
            stream = await aoa().chat.completions.create(model="sim", messages=MESSAGES,
                                                         stream=True)
            return [c.choices[0].delta.content async for c in stream if c.choices]
        return asyncio.run(go())

    def openai_connection_error() -> Any:
        client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
        return client.chat.completions.create(model="sim", messages=MESSAGES)

    def anthropic_sync() -> Any:
        m = an().messages.create(model="sim-c", max_tokens=8, messages=MESSAGES)
        return type(m).__name__, m.content[0].text, m.usage.output_tokens

    def anthropic_sync_stream() -> Any:
        with an().messages.stream(model="sim-c", max_tokens=8, messages=MESSAGES) as stream:
            return list(stream.text_stream)

    def anthropic_raw_stream() -> Any:
        events = an().messages.create(model="sim-c", max_tokens=8, messages=MESSAGES,
                                      stream=True)
        return [e.type for e in events]

    def anthropic_async() -> Any:
        async def go() -> Any:
            m = await aan().messages.create(model="sim-c", max_tokens=8, messages=MESSAGES)
            return m.content[0].text
        return asyncio.run(go())

    def anthropic_async_stream() -> Any:
        async def go() -> Any:
            async with aan().messages.stream(model="sim-c", max_tokens=8,
                                             messages=MESSAGES) as stream:
                return [t async for t in stream.text_stream]
        return asyncio.run(go())

    def subprocess_run() -> Any:
        p = subprocess.run([sys.executable, "-c", "print(7)"], capture_output=True,
                           text=True, check=False)
        return p.returncode, p.stdout

    def subprocess_unwaited_then_waited() -> Any:
        p = subprocess.Popen(["sh", "-c", "exit 3"])
        return p.wait()

    def subprocess_missing() -> Any:
        return subprocess.run(["/nonexistent/agent-latency-test"], check=False)

    def os_system() -> Any:
        return os.system("exit 2")

    def tool_and_task() -> Any:
        with agent_latency.task("t"), agent_latency.tool("x"):
            return 5

    def tool_raises() -> Any:
        with agent_latency.task("t"), agent_latency.tool("x"):
            raise Boom("mine")

    def decorated_async() -> Any:
        @agent_latency.tool("deco")
        async def work(x: int) -> int:
            return x * 2

        @agent_latency.task("deco-task")
        async def main() -> int:
            return await work(21)

        return asyncio.run(main())

    return {name: fn for name, fn in locals().items()
            if callable(fn) and name not in {"oa", "aoa", "an", "aan"}}


def _run_all(sim: Simulator) -> dict[str, Any]:
    outcomes = {}
    for name, fn in _scenarios(sim).items():
        with agent_latency.task(f"outer-{name}"):
            outcomes[name] = _outcome(fn)
    return outcomes


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(FAST) as server:
        yield server


@pytest.fixture(scope="module")
def baseline(sim: Simulator) -> dict[str, Any]:
    """The scenarios' outcomes without us: nothing instrumented, no provider."""
    return _run_all(sim)


@pytest.fixture(scope="module")
def instrumented(baseline: dict[str, Any]) -> Iterator[None]:
    instrumentors = _instrumentors()
    for i in instrumentors:
        i.instrument()
    yield
    for i in reversed(instrumentors):
        i.uninstrument()


hit: set[str] = set()


@pytest.fixture
def armed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    place = request.param
    monkeypatch.setattr(_log, "_said", set())
    _log.FAULTS.add(place)
    try:
        yield place
    finally:
        _log.FAULTS.discard(place)


class TestEveryPlace:
    """One place armed at a time: the program sees exactly what it sees without us."""

    @pytest.mark.parametrize("armed", PLACES, indirect=True)
    def test_outcomes_unchanged(self, armed: str, otel: Any, sim: Simulator,
                                baseline: dict[str, Any], instrumented: None,
                                caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level(logging.ERROR, logger="agent_latency"):
            outcomes = _run_all(sim)  # most places are passed many times: logged once
        assert outcomes == baseline
        logged = [r for r in caplog.records if "internal error" in r.getMessage()]
        places = [r.args[0] for r in logged]  # type: ignore[index]
        assert places.count(armed) <= 1, places  # once per place, not once per call
        assert set(places) <= {armed}, places
        if places:
            hit.add(armed)
            assert logged[0].exc_info and logged[0].exc_info[0] is _log.InjectedFault

    def test_the_scenarios_reached_the_core_places(self) -> None:
        if len(hit) == 0:
            pytest.skip("run with the parametrized cases")
        assert hit >= MUST_HIT, sorted(MUST_HIT - hit)


class TestSwitch:
    """The switch is off unless asked for, and read from the environment once."""

    def test_off_by_default(self) -> None:
        assert not _log._armed_from_environment() or os.environ.get(
            "AGENT_LATENCY_FAULT_INJECTION")

    def test_environment_arms_places(self, tmp_path: Path) -> None:
        code = ("import agent_latency\nagent_latency.instrument()\n"
                "with agent_latency.task('t'):\n    with agent_latency.tool('x'):\n"
                "        print('ok')\n")
        env = {**os.environ, "AGENT_LATENCY_FAULT_INJECTION": "*",
               "AGENT_LATENCY_DIR": str(tmp_path)}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "ok\n"
        assert "InjectedFault" in proc.stderr
