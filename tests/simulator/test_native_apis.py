"""Ollama's, Cohere's and Bedrock runtime's APIs: the shapes their own clients read, tool
calls included, and the server-reported durations equal to the truth record."""

from __future__ import annotations

import json

import pytest

from .conftest import CHAT_TOOLS, TOOL_SCRIPT, USER

httpx = pytest.importorskip("httpx")


class TestOllama:
    """NDJSON lines, a stream by default, the done line's durations from the truth."""

    def test_streams_by_default(self, sim) -> None:
        r = httpx.post(sim.base_url + "/api/chat", json={"model": "m", "messages": USER})
        assert r.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in r.text.splitlines()]
        assert [line["done"] for line in lines] == [False] * (len(lines) - 1) + [True]
        (truth,) = sim.wait_truth(1)
        last = lines[-1]
        assert last["eval_count"] == truth["output_tokens"] == len(lines) - 1
        assert last["prompt_eval_count"] == truth["input_tokens"]
        assert last["prompt_eval_duration"] == round(truth["prefill_s"] * 1e9)
        assert last["eval_duration"] == round(truth["output_generation_s"] * 1e9)
        assert last["load_duration"] == 0

    def test_tool_call_through_the_client(self, make_sim) -> None:
        ollama = pytest.importorskip("ollama")
        sim = make_sim(script=TOOL_SCRIPT)
        reply = ollama.Client(host=sim.base_url).chat(model="m", messages=USER, stream=False,
                                                      tools=CHAT_TOOLS)
        assert reply.message.content == "Checking."
        (call,) = reply.message.tool_calls
        assert call.function.name == "run_shell"
        assert call.function.arguments == {"command": "ls"}


class TestCohere:
    """Typed events through cohere's ClientV2, tool calls included."""

    def test_tool_call_stream(self, make_sim) -> None:
        cohere = pytest.importorskip("cohere")
        sim = make_sim(script=TOOL_SCRIPT)
        client = cohere.ClientV2(api_key="k", base_url=sim.base_url)
        events = list(client.chat_stream(model="c", messages=USER, tools=CHAT_TOOLS))
        kinds = [e.type for e in events]
        assert kinds[0] == "message-start" and kinds[-1] == "message-end"
        assert "tool-call-start" in kinds and "content-delta" in kinds
        assert events[-1].delta.finish_reason == "TOOL_CALL"
        args = "".join(e.delta.message.tool_calls.function.arguments for e in events
                       if e.type == "tool-call-delta")
        assert json.loads(args) == {"command": "ls"}


class TestBedrock:
    """Converse's tool use and the event stream through botocore (which checks both CRCs)."""

    def test_converse_stream_tool_use(self, make_sim) -> None:
        boto3 = pytest.importorskip("boto3")
        sim = make_sim(script=TOOL_SCRIPT)
        client = boto3.client("bedrock-runtime", endpoint_url=sim.base_url,
                              region_name="us-east-1", aws_access_key_id="k",
                              aws_secret_access_key="k")
        tool = {"toolSpec": {"name": "run_shell", "inputSchema": {
            "json": CHAT_TOOLS[0]["function"]["parameters"]}}}
        events = list(client.converse_stream(
            modelId="m", messages=[{"role": "user", "content": [{"text": "hi"}]}],
            toolConfig={"tools": [tool]})["stream"])
        names = [next(iter(e)) for e in events]
        assert names[0] == "messageStart" and names[-2:] == ["messageStop", "metadata"]
        start = next(e["contentBlockStart"] for e in events if "contentBlockStart" in e)
        assert start["start"]["toolUse"]["name"] == "run_shell"
        assert events[-2]["messageStop"]["stopReason"] == "tool_use"
        (truth,) = sim.wait_truth(1)
        assert events[-1]["metadata"]["usage"]["outputTokens"] == truth["output_tokens"]
