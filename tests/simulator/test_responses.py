"""Responses API over HTTP (openai SDK) and over a WebSocket (websockets, SDK connect)."""

from __future__ import annotations

import asyncio
import json

import pytest

from .conftest import RESPONSES_TOOLS, TOOL_SCRIPT

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")

STREAM_ORDER = ["response.created", "response.in_progress", "response.output_item.added",
                "response.content_part.added", "response.output_text.delta"]


def _client(sim):  # type: ignore[no-untyped-def]
    return openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)


class TestResponsesHttp:
    """Streaming events, the stream helper, function calls and plain JSON."""

    def test_stream_events(self, sim) -> None:
        events = list(_client(sim).responses.create(model="m", input="hi", stream=True,
                                                    max_output_tokens=3))
        kinds = [e.type for e in events]
        assert kinds[:5] == STREAM_ORDER
        assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                              "response.output_item.done", "response.incomplete"]
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert events[-1].response.usage.output_tokens == 3

    def test_stream_helper_with_function_call(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        with _client(sim).responses.stream(model="m", input="hi", tools=RESPONSES_TOOLS) as s:
            kinds = [e.type for e in s]
            final = s.get_final_response()
        assert "response.function_call_arguments.delta" in kinds
        assert kinds[-1] == "response.completed"
        assert final.output_text == "Checking."
        call = final.output[1]
        assert call.type == "function_call" and json.loads(call.arguments) == {"command": "ls"}

    def test_turns_from_input_items_and_previous_response(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        client = _client(sim)
        first = client.responses.create(model="m", input="hi", tools=RESPONSES_TOOLS)
        call = first.output[1]
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "a.txt"}
        by_items = client.responses.create(
            model="m", tools=RESPONSES_TOOLS,
            input=[{"role": "user", "content": "hi"},
                   *[o.model_dump(exclude_none=True) for o in first.output], output])
        by_previous = client.responses.create(model="m", tools=RESPONSES_TOOLS, input=[output],
                                              previous_response_id=first.id)
        assert by_items.output_text == by_previous.output_text == "All done."

    def test_parse_structured_output(self, sim) -> None:
        class Answer(pydantic.BaseModel):
            ok: bool
            items: list[str]

        r = _client(sim).responses.parse(model="m", input="hi", text_format=Answer)
        assert r.output_parsed == Answer(ok=False, items=[])


class TestResponsesWebSocket:
    """One persistent WebSocket carries several responses; truth sees one connection."""

    def test_websockets_client(self, sim) -> None:
        websockets = pytest.importorskip("websockets")

        async def run() -> list[list[str]]:
            url = sim.base_url.replace("http://", "ws://") + "/v1/responses"
            out = []
            async with websockets.connect(url) as ws:
                for _ in range(2):
                    await ws.send(json.dumps({"type": "response.create", "model": "m",
                                              "input": "hi", "max_output_tokens": 4}))
                    kinds = []
                    while True:
                        event = json.loads(await ws.recv())
                        kinds.append(event["type"])
                        if event["type"] in ("response.completed", "response.incomplete"):
                            break
                    out.append(kinds)
                await ws.send(json.dumps({"type": "bogus"}))
                assert json.loads(await ws.recv())["type"] == "error"
            return out

        runs = asyncio.run(run())
        assert runs[0][:5] == STREAM_ORDER and runs[0].count("response.output_text.delta") == 4
        truth = sim.wait_truth(2)
        assert [t["transport"] for t in truth] == ["websocket", "websocket"]
        assert truth[0]["connection_id"] == truth[1]["connection_id"]
        assert [t["new_connection"] for t in truth] == [True, False]

    def test_openai_sdk_connect(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        client = _client(sim)
        if not hasattr(client.responses, "connect"):
            pytest.skip("this openai release has no responses.connect()")
        with client.responses.connect() as conn:
            conn.response.create(model="m", input="hi", tools=RESPONSES_TOOLS)
            for event in conn:
                if event.type == "response.completed":
                    first = event.response
                    break
            conn.response.create(model="m", previous_response_id=first.id,
                                 tools=RESPONSES_TOOLS,
                                 input=[{"type": "function_call_output",
                                         "call_id": first.output[1].call_id, "output": "x"}])
            text = []
            for event in conn:
                if event.type == "response.output_text.delta":
                    text.append(event.delta)
                if event.type == "response.completed":
                    break
        assert first.output[1].name == "run_shell"
        assert "".join(text) == "All done."
