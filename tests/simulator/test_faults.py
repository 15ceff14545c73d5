"""Faults on demand, as the SDKs see them."""

from __future__ import annotations

import time

import pytest

from agent_latency.simulator import Fault

from .conftest import USER, busy_slack

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx = pytest.importorskip("httpx")


CUT_ERRORS = {"APIConnectionError", "RemoteProtocolError"}


def _clients(sim, retries: int = 0):  # type: ignore[no-untyped-def]
    return (openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=retries),
            anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=retries))


class TestFaultSpecs:
    """The ``KIND[:key=value,...]`` grammar and its validation."""

    def test_parse(self) -> None:
        f = Fault.parse("429:first=2,retry_after=0.5")
        assert (f.kind, f.first, f.retry_after) == ("rate_limit", 2, 0.5)
        assert Fault.parse({"kind": "cut", "after": 3}).after == 3

    @pytest.mark.parametrize("spec", ["nope", "cut:after", "cut:bogus=1"])
    def test_rejects(self, spec: str) -> None:
        with pytest.raises(ValueError):
            Fault.parse(spec)


class TestStatusFaults:
    """429 with retry-after, 500 and 529 in each API's error shape; first=N recovers."""

    def test_rate_limit_first_request_then_sdk_retry_succeeds(self, make_sim) -> None:
        sim = make_sim(faults=("rate_limit:first=1,retry_after=0",))
        oa, _ = _clients(sim, retries=2)
        r = oa.chat.completions.create(model="m", messages=USER, max_tokens=2)
        assert r.choices[0].message.content == "lorem ipsum"
        assert [t["status"] for t in sim.wait_truth(2)] == [429, 200]

    def test_shapes(self, make_sim) -> None:
        sim = make_sim(faults=("overloaded:retry_after=3",))
        oa, an = _clients(sim)
        with pytest.raises(anthropic.APIStatusError) as exc:
            an.messages.create(model="c", max_tokens=2, messages=USER)
        assert exc.value.status_code == 529
        assert exc.value.body["error"]["type"] == "overloaded_error"
        assert exc.value.response.headers["retry-after"] == "3"
        with pytest.raises(openai.APIStatusError) as oexc:
            oa.chat.completions.create(model="m", messages=USER)
        assert oexc.value.status_code == 529

    def test_server_error(self, make_sim) -> None:
        sim = make_sim(faults=("server_error",))
        oa, _ = _clients(sim)
        with pytest.raises(openai.InternalServerError):
            oa.chat.completions.create(model="m", messages=USER)
        assert sim.wait_truth(1)[0]["fault"] == "server_error"


class TestStreamFaults:
    """Cut streams, malformed chunks and slow headers."""

    def test_cut_stream_ends_without_terminal_event(self, make_sim) -> None:
        sim = make_sim(faults=("cut:after=3",))
        oa, an = _clients(sim)
        # SDKs surface it as their connection error or the HTTP stack's (httpx or httpx2)
        with pytest.raises(Exception) as exc:
            list(oa.chat.completions.create(model="m", messages=USER, stream=True))
        assert type(exc.value).__name__ in CUT_ERRORS
        with pytest.raises(Exception) as exc:
            list(an.messages.create(model="c", max_tokens=50, messages=USER, stream=True))
        assert type(exc.value).__name__ in CUT_ERRORS
        recs = sim.wait_truth(2)
        assert [(r["fault"], r["output_tokens"]) for r in recs] == [("cut", 3), ("cut", 3)]

    def test_malformed_chunk(self, make_sim) -> None:
        sim = make_sim(faults=("malformed:after=2",))
        r = httpx.post(sim.base_url + "/v1/chat/completions", json={
            "model": "m", "messages": USER, "stream": True, "max_tokens": 5})
        lines = [x for x in r.text.splitlines() if x.startswith("data: {")]
        assert any(x.rstrip().endswith('"delta":') for x in lines)

    def test_slow_headers(self, make_sim) -> None:
        sim = make_sim(faults=("slow_headers:delay_ms=200",))
        t0 = time.perf_counter()
        with httpx.stream("POST", sim.base_url + "/v1/chat/completions", json={
                "model": "m", "messages": USER, "stream": True, "max_tokens": 2}) as r:
            headers_after = time.perf_counter() - t0
            r.read()
        assert headers_after >= 0.19
        rec = sim.wait_truth(1)[0]
        slack = busy_slack()
        assert 0.2 <= rec["fault_delay_s"] <= 0.22 + slack and rec["queue_s"] < 0.02 + slack

    def test_probability_zero_never_fires(self, make_sim) -> None:
        sim = make_sim(faults=("server_error:p=0",))
        oa, _ = _clients(sim)
        oa.chat.completions.create(model="m", messages=USER, max_tokens=1)

    def test_script_turn_fault(self, make_sim) -> None:
        sim = make_sim(script={"turns": [{"fault": "rate_limit"}]})
        _, an = _clients(sim)
        with pytest.raises(anthropic.RateLimitError):
            an.messages.create(model="c", max_tokens=2, messages=USER)
