"""Chat completions through the real openai SDK."""

from __future__ import annotations

import asyncio
import json

import pytest

from .conftest import CHAT_TOOLS, TOOL_SCRIPT, USER

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")


class TestChatStreaming:
    """Streamed chunks have the real API's shape: role delta, content, finish, usage."""

    def test_role_delta_content_and_usage_chunk(self, openai_client, sim) -> None:
        stream = openai_client.chat.completions.create(
            model="m", messages=USER, stream=True, max_tokens=7,
            stream_options={"include_usage": True})
        chunks = list(stream)
        first = chunks[0].choices[0].delta
        assert first.role == "assistant" and not first.content
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "lorem ipsum dolor sit amet consectetur adipiscing"
        finish = [c.choices[0].finish_reason for c in chunks if c.choices]
        assert finish[-1] == "length"
        assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 7
        assert chunks[-1].usage.prompt_tokens == sim.wait_truth(1)[0]["input_tokens"]

    def test_no_usage_chunk_unless_asked(self, openai_client) -> None:
        chunks = list(openai_client.chat.completions.create(model="m", messages=USER,
                                                            stream=True, max_tokens=3))
        assert all(c.choices for c in chunks)
        assert chunks[-1].choices[0].finish_reason == "length"

    def test_tool_call_deltas(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
        with client.chat.completions.stream(model="m", messages=USER, tools=CHAT_TOOLS) as s:
            for _ in s:
                pass
            final = s.get_final_completion()
        msg = final.choices[0].message
        assert msg.content == "Checking."
        assert final.choices[0].finish_reason == "tool_calls"
        call = msg.tool_calls[0]
        assert call.function.name == "run_shell"
        assert json.loads(call.function.arguments) == {"command": "ls"}

    def test_async_client_streams(self, sim) -> None:
        async def run() -> str:
            client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k")
            stream = await client.chat.completions.create(model="m", messages=USER,
                                                          stream=True, max_tokens=4)
            text = "".join([c.choices[0].delta.content or "" async for c in stream])
            await client.close()
            return text

        assert asyncio.run(run()) == "lorem ipsum dolor sit"


class TestChatNonStreaming:
    """Plain JSON bodies, tool calls and structured output parse in the SDK."""

    def test_plain_body(self, openai_client) -> None:
        r = openai_client.chat.completions.create(model="m", messages=USER, max_tokens=5)
        assert r.choices[0].message.content == "lorem ipsum dolor sit amet"
        assert r.usage.completion_tokens == 5 and r.object == "chat.completion"

    def test_tool_call_body(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
        r = client.chat.completions.create(model="m", messages=USER, tools=CHAT_TOOLS)
        assert r.choices[0].message.tool_calls[0].function.name == "run_shell"
        r2 = client.chat.completions.create(
            model="m", tools=CHAT_TOOLS,
            messages=[*USER, r.choices[0].message.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": "x", "content": "a.txt"}])
        assert r2.choices[0].message.content == "All done."

    def test_parse_structured_output(self, openai_client) -> None:
        class Answer(pydantic.BaseModel):
            city: str
            population: int

        parse = getattr(openai_client.chat.completions, "parse", None)
        if parse is None:
            parse = openai_client.beta.chat.completions.parse
        r = parse(model="m", messages=USER, response_format=Answer)
        assert r.choices[0].message.parsed == Answer(city="lorem", population=0)


class TestEmbeddingsAndModels:
    """Embeddings (float and base64) and the model list."""

    def test_embeddings(self, openai_client) -> None:
        r = openai_client.embeddings.create(model="e", input=["a", "b"])
        assert len(r.data) == 2 and len(r.data[0].embedding) == 16
        raw = openai_client.embeddings.create(model="e", input="a", encoding_format="float")
        assert raw.data[0].embedding == pytest.approx(r.data[0].embedding, rel=1e-5)

    def test_models(self, openai_client) -> None:
        assert [m.id for m in openai_client.models.list()] == ["sim-model"]
