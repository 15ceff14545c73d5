"""Messages API through the real anthropic SDK."""

from __future__ import annotations

import pytest

from .conftest import ANTHROPIC_TOOLS, TOOL_SCRIPT, USER

anthropic = pytest.importorskip("anthropic")


class TestMessagesStreaming:
    """Raw events and the ``messages.stream()`` helper see real-shaped events and usage."""

    def test_raw_events(self, anthropic_client, sim) -> None:
        events = list(anthropic_client.messages.create(model="c", max_tokens=5, messages=USER,
                                                       stream=True))
        kinds = [e.type for e in events]
        assert kinds[:2] == ["message_start", "content_block_start"]  # the SDK drops pings
        assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
        assert events[0].message.usage.input_tokens == sim.wait_truth(1)[0]["input_tokens"]
        assert events[-2].usage.output_tokens == 5
        assert events[-2].delta.stop_reason == "max_tokens"

    def test_stream_helper_with_tool_use(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        client = anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0)
        with client.messages.stream(model="c", max_tokens=100, messages=USER,
                                    tools=ANTHROPIC_TOOLS) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert text == "Checking."
        assert final.stop_reason == "tool_use"
        assert final.content[1].name == "run_shell" and final.content[1].input == {"command": "ls"}
        assert final.usage.output_tokens == sim.wait_truth(1)[0]["output_tokens"]


    def test_ping_on_the_wire(self, sim) -> None:
        httpx = pytest.importorskip("httpx")
        r = httpx.post(sim.base_url + "/v1/messages", json={
            "model": "c", "max_tokens": 2, "messages": USER, "stream": True})
        assert "event: message_start\n" in r.text and "event: ping\n" in r.text
        assert r.headers["request-id"] == r.headers["x-request-id"]


class TestMessagesNonStreaming:
    """Plain JSON messages, turn selection by assistant messages, model list."""

    def test_turns(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        client = anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0)
        m1 = client.messages.create(model="c", max_tokens=100, messages=USER,
                                    tools=ANTHROPIC_TOOLS)
        assert m1.content[1].type == "tool_use"
        m2 = client.messages.create(
            model="c", max_tokens=100, tools=ANTHROPIC_TOOLS,
            messages=[*USER, {"role": "assistant", "content": m1.content},
                      {"role": "user", "content": [{"type": "tool_result",
                                                    "tool_use_id": m1.content[1].id,
                                                    "content": "a.txt"}]}])
        assert m2.content[0].text == "All done." and m2.stop_reason == "end_turn"

    def test_models_list_in_anthropic_shape(self, anthropic_client) -> None:
        assert [m.id for m in anthropic_client.models.list().data] == ["sim-model"]
