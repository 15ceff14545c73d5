"""A real agent loop finishes the example coding-agent script with real shell tools."""

from __future__ import annotations

import json
import subprocess

import pytest

from agent_latency.simulator import Script

from .conftest import ANTHROPIC_TOOLS, CHAT_TOOLS, EXAMPLE_SCRIPT


def run_shell(command: str) -> str:
    """The tool the script asks for."""
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30)
    return done.stdout + done.stderr


class TestExampleScript:
    """examples/scripts/coding_agent.json: ls, python -c print(42), then an answer."""

    def test_loads(self) -> None:
        script = Script.load(EXAMPLE_SCRIPT)
        assert len(script.models["*"]) == 3

    def test_openai_agent_loop(self, make_sim) -> None:
        openai = pytest.importorskip("openai")
        sim = make_sim(script=str(EXAMPLE_SCRIPT))
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
        messages: list[dict] = [{"role": "user", "content": "What does the script print?"}]
        outputs = []
        for _ in range(5):
            r = client.chat.completions.create(model="gpt-sim", messages=messages,
                                               tools=CHAT_TOOLS)
            msg = r.choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                break
            for call in msg.tool_calls:
                out = run_shell(json.loads(call.function.arguments)["command"])
                outputs.append(out)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": out})
        assert outputs[1].strip() == "42"
        assert "42" in (msg.content or "")
        assert [t["turn"] for t in sim.wait_truth(3)] == [0, 1, 2]

    def test_anthropic_agent_loop(self, make_sim) -> None:
        anthropic = pytest.importorskip("anthropic")
        sim = make_sim(script=str(EXAMPLE_SCRIPT))
        client = anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0)
        messages: list[dict] = [{"role": "user", "content": "What does the script print?"}]
        outputs = []
        for _ in range(5):
            with client.messages.stream(model="claude-sim", max_tokens=1024, tools=ANTHROPIC_TOOLS,
                                        messages=messages) as stream:
                m = stream.get_final_message()
            messages.append({"role": "assistant", "content": [b.model_dump() for b in m.content]})
            uses = [b for b in m.content if b.type == "tool_use"]
            if not uses:
                break
            results = []
            for use in uses:
                out = run_shell(use.input["command"])
                outputs.append(out)
                results.append({"type": "tool_result", "tool_use_id": use.id, "content": out})
            messages.append({"role": "user", "content": results})
        assert outputs[1].strip() == "42"
        assert m.stop_reason == "end_turn" and "42" in m.content[0].text
