"""After streamed calls whose reads were tapped, the SDK's pooled connection is as it was:
httpcore's own stream in its place (in the connection and the response's extension), and,
on CPython 3.11+, the connection's and the stream's attribute reads still specialised (a tap
that left either object with a dict of its own slowed every later read on the connection)."""

from __future__ import annotations

import asyncio
import dis
import sys
from typing import Any

import openai
import pytest

from agent_latency.instrumentation.net import _taps
from agent_latency.instrumentation.net._methods import is_stand_in


def _counting_taps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Each tap on an httpcore stream, as (its connection, how to untap)."""
    made: list[tuple[Any, Any]] = []
    real = _taps.stand_in_attribute

    def counting(owner: Any, *args: Any, **kwargs: Any) -> Any:
        undo = real(owner, *args, **kwargs)
        made.append((owner, undo))
        return undo

    monkeypatch.setattr(_taps, "stand_in_attribute", counting)
    return made


def _opnames(obj: Any, site: Any) -> list[str]:
    for _ in range(200):  # warm: the adaptive interpreter specialises after a few runs
        site(obj)
    return [i.opname for i in dis.get_instructions(site, adaptive=True) if "ATTR" in i.opname]


def _connection_site(connection: Any) -> Any:
    return connection._network_stream, connection._h11_state


def _stream_site(stream: Any) -> Any:
    return stream._sock


def _async_stream_site(stream: Any) -> Any:
    return stream._stream


def _stream(sim: Any, client: Any) -> list[str]:
    return [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True, max_tokens=5)
        if c.choices]


class TestSync:
    """The sync client (httpcore's ``SyncStream``, in the connection's ``_network_stream``)."""

    def test_connection_and_stream_as_they_were(self, sim: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
        made = _counting_taps(monkeypatch)
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True, max_tokens=5)
        extension = raw.http_response.extensions["network_stream"]
        for _ in raw.parse():
            pass
        for _ in range(3):
            assert "".join(_stream(sim, client))
        assert len(made) == 4 and all(undo is not None for _, undo in made)  # all tapped
        connection = made[-1][0]
        stream = connection._network_stream
        assert not is_stand_in(stream) and not is_stand_in(extension)
        assert extension is made[0][0]._network_stream
        if sys.version_info >= (3, 11):
            assert all("INSTANCE_VALUE" in name
                       for name in _opnames(connection, _connection_site))
            assert _opnames(stream, _stream_site) == ["LOAD_ATTR_INSTANCE_VALUE"]
        client.close()


class TestAsync:
    """The async client (httpcore's anyio stream; its protocol's stand-in in the transport)."""

    def test_connection_stream_and_protocol_as_they_were(
            self, sim: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        made = _counting_taps(monkeypatch)

        async def main() -> tuple[Any, Any, Any]:
            client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk",
                                        max_retries=0)
            for _ in range(3):
                async for _ in await client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "hi"}],
                        stream=True, max_tokens=5):
                    pass
            connection = made[-1][0]
            stream = connection._network_stream
            transport = stream._stream._transport
            result = connection, stream, (transport.get_protocol(), stream._stream._protocol)
            await client.close()
            return result

        connection, stream, (in_transport, own) = asyncio.run(main())
        assert len(made) == 3 and all(undo is not None for _, undo in made)
        assert not is_stand_in(stream) and in_transport is own
        if sys.version_info >= (3, 11):
            assert all("INSTANCE_VALUE" in name
                       for name in _opnames(connection, _connection_site))
            assert _opnames(stream, _async_stream_site) == ["LOAD_ATTR_INSTANCE_VALUE"]
