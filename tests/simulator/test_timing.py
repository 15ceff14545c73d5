"""Timing the simulator promises: prefill, output rate, chunks, capacity, truth fields."""

from __future__ import annotations

import itertools
import json
import time

import pytest

from agent_latency.simulator import Simulator

from .conftest import near

httpx = pytest.importorskip("httpx")

TOL = 0.015  # generous: timing precision belongs in the benchmark
# quiet: the simulator's own clock against its promise, to 15 ms; make test runs it alone.
pytestmark = pytest.mark.quiet


def _chat(sim: Simulator, chars: int, tokens: int, stream: bool = True) -> httpx.Response:
    return httpx.post(sim.base_url + "/v1/chat/completions", timeout=30, json={
        "model": "m", "stream": stream, "max_tokens": tokens,
        "messages": [{"role": "user", "content": "x" * (chars - 4)}],  # "user" is 4 chars
        "simulator": {"output_tokens": tokens}})


class TestRates:
    """Prefill = input/prefill_tps and output gaps = 1/output_tps, as the truth says."""

    def test_prefill_and_output_generation(self, make_sim) -> None:
        sim = make_sim(prefill_tps=10_000.0, output_tps=500.0)
        t0 = time.perf_counter()
        r = _chat(sim, 4000, 26)  # 1000 input tokens -> 100 ms; 25 gaps -> 50 ms
        elapsed = time.perf_counter() - t0
        rec = sim.wait_truth(1)[0]
        assert rec["input_tokens"] == 1000 and rec["output_tokens"] == 26
        assert near(rec["prefill_s"], 0.100, TOL)
        assert near(rec["output_generation_s"], 0.050, TOL)
        assert near(rec["first_token_at_mono"] - rec["prefill_started_at_mono"], 0.100, TOL)
        assert elapsed >= 0.150
        assert r.headers["x-request-id"] == rec["request_id"]
        assert rec["started_at"] <= rec["first_token_at"] <= rec["last_token_at"]
        assert rec["chunks"] == 26

    def test_tokens_per_chunk(self, make_sim) -> None:
        sim = make_sim(tokens_per_chunk=4, output_tps=2000.0)
        r = _chat(sim, 8, 10)
        contents = [line for line in r.text.splitlines() if '"delta": {"content"' in line]
        assert len(contents) == 3  # 4 + 4 + 2 tokens
        assert sim.wait_truth(1)[0]["chunks"] == 3

    def test_jitter_keeps_mean_rate(self, make_sim) -> None:
        sim = make_sim(output_tps=1000.0, jitter=0.5)
        _chat(sim, 8, 101)
        rec = sim.wait_truth(1)[0]
        assert near(rec["output_generation_s"], 0.100, 0.03)

    def test_non_streaming_takes_the_same_time(self, make_sim) -> None:
        sim = make_sim(prefill_tps=20_000.0, output_tps=400.0)
        t0 = time.perf_counter()
        _chat(sim, 4000, 21, stream=False)  # 50 ms + 50 ms
        assert time.perf_counter() - t0 >= 0.1
        rec = sim.wait_truth(1)[0]
        assert near(rec["output_generation_s"], 0.050, TOL)
        assert rec["response_written_at_mono"] >= rec["last_token_at_mono"]


class TestCapacity:
    """Queue time, one prefill slot, a bounded decode batch."""

    def test_queue_ms(self, make_sim) -> None:
        sim = make_sim(queue_ms=40.0)
        _chat(sim, 8, 2)
        assert near(sim.wait_truth(1)[0]["queue_s"], 0.040, TOL)

    def test_prefill_is_serialized(self, make_sim) -> None:
        import concurrent.futures

        sim = make_sim(prefill_tps=10_000.0)  # 500 tokens -> 50 ms each
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            # the gate, not the threads' luck, makes the three arrive together
            with sim.held_admission(3) as gate:
                sent = [pool.submit(_chat, sim, 2000, 2) for _ in range(3)]
            assert all(f.result().status_code == 200 for f in sent)
        recs = sorted(sim.wait_truth(3), key=lambda r: r["prefill_started_at_mono"])
        starts = [r["prefill_started_at_mono"] for r in recs]
        # one prefill at a time: each starts after the one before it has ended
        for before, after in itertools.pairwise(recs):
            assert after["prefill_started_at_mono"] >= (
                before["prefill_started_at_mono"] + before["prefill_s"])
        assert starts[1] - gate.opened_at_mono >= 0.05  # waited for 1 other prefill
        assert starts[2] - gate.opened_at_mono >= 0.10  # and the last for 2
        assert recs[2]["queue_s"] >= 0.10

    def test_max_batch_queues_beyond_the_batch(self, make_sim) -> None:
        import concurrent.futures

        sim = make_sim(max_batch=1, output_tps=500.0)  # 20 tokens -> ~40 ms decode
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            with sim.held_admission(2) as gate:
                sent = [pool.submit(_chat, sim, 8, 20) for _ in range(2)]
            assert all(f.result().status_code == 200 for f in sent)
        first, second = sorted(sim.wait_truth(2), key=lambda r: r["prefill_started_at_mono"])
        # one seat: the second is admitted only once the first has streamed its last token
        assert second["prefill_started_at_mono"] >= first["last_token_at_mono"]
        assert second["prefill_started_at_mono"] - gate.opened_at_mono >= 19 / 500.0
        assert second["queue_s"] >= 19 / 500.0


class TestTruthFile:
    """Every request appends one JSON line with the documented fields."""

    def test_file_lines(self, make_sim, tmp_path) -> None:
        path = tmp_path / "truth.jsonl"
        sim = make_sim(truth_path=str(path))
        _chat(sim, 8, 3)
        _chat(sim, 8, 3, stream=False)
        sim.wait_truth(2)
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert len(lines) == 2
        for key in ("request_id", "api", "model", "stream", "input_tokens", "output_tokens",
                    "queue_s", "prefill_s", "output_generation_s", "started_at",
                    "first_token_at", "last_token_at", "started_at_mono",
                    "first_token_at_mono", "last_token_at_mono", "fault", "connection_id",
                    "new_connection"):
            assert key in lines[0]
        assert [x["stream"] for x in lines] == [True, False]


class TestServerTiming:
    """--server-timing adds TGI headers and vLLM metrics to non-streaming responses."""

    def test_headers_and_metrics(self, make_sim) -> None:
        sim = make_sim(server_timing=True, prefill_tps=10_000.0, output_tps=1000.0)
        r = _chat(sim, 2000, 11, stream=False)
        rec = sim.wait_truth(1)[0]
        assert float(r.headers["x-queue-time"]) >= 0
        assert float(r.headers["x-inference-time"]) == pytest.approx(
            (rec["prefill_s"] + rec["output_generation_s"]) * 1e3, abs=0.01)
        assert r.headers["x-prompt-tokens"] == "500" and r.headers["x-generated-tokens"] == "11"
        metrics = r.json()["metrics"]
        assert near(metrics["generation_time_ms"] / 1e3, 0.010, TOL)
        # 10 gaps: the mean gap is the generation time over 10, however late its last wake-up
        assert metrics["mean_itl_ms"] == pytest.approx(metrics["generation_time_ms"] / 10)

    def test_off_by_default(self, sim) -> None:
        r = _chat(sim, 8, 2, stream=False)
        assert "x-inference-time" not in r.headers and "metrics" not in r.json()
