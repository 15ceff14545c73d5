"""The simulator refuses bad input: a 400 with the API's error body per request, one line and
exit 2 per flag, no traceback anywhere, and silence when a client hangs up early."""

from __future__ import annotations

import json
import logging
import math
import socket
import subprocess
import sys
import time

import pytest

from agent_latency.simulator import Simulator, SimulatorConfig, main

httpx = pytest.importorskip("httpx")

USER = [{"role": "user", "content": "hi"}]
# (path, a valid body) per route that takes "simulator" overrides
ROUTES = [
    ("/v1/chat/completions", {"model": "m", "messages": USER}),
    ("/v1/responses", {"model": "m", "input": "hi"}),
    ("/v1/messages", {"model": "m", "messages": USER, "max_tokens": 5}),
    ("/v1beta/models/m:generateContent", {"contents": [{"role": "user",
                                                        "parts": [{"text": "hi"}]}]}),
]
BAD_OVERRIDES = [
    {"output_tps": 0}, {"output_tps": -5}, {"output_tps": "fast"}, {"prefill_tps": 0},
    {"prefill_tps": math.inf}, {"prefill_tps": None}, {"output_tps": math.nan},
    {"tokens_per_chunk": 0},
    {"tokens_per_chunk": 2.5}, {"tokens_per_chunk": True}, {"output_tokens": -1},
    {"output_tokens": "10"}, {"output_tokens": 10**12}, {"jitter": 1.0}, {"jitter": -0.1},
    {"queue_ms": -1}, {"queue_ms": [1]}, {"fault": "nope"}, {"fault": {"after": 3}},
    {"fault": "cut:after=x"}, {"fault": "rate_limit:p=nan"}, {"fault": 7},
    {"fault": {"kind": "cut", "after": 1e300}}, {"outptu_tps": 5},
]
NOT_AN_OBJECT = ["fast", 5, [1], True]


def _log_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING or r.exc_info]


@pytest.fixture
def sim():  # type: ignore[no-untyped-def]
    """A fast simulator in this process (its logs reach caplog)."""
    with Simulator(SimulatorConfig(prefill_tps=1e6, output_tps=1e5)) as started:
        yield started


class TestBadOverrides:
    """Every bad ``"simulator"`` setting is a 400 in the route's error shape, never a 500."""

    @pytest.mark.parametrize("override", BAD_OVERRIDES + NOT_AN_OBJECT, ids=repr)
    @pytest.mark.parametrize("stream", [False, True])
    def test_chat(self, sim, caplog, override, stream) -> None:
        # json.dumps writes NaN/Infinity, which the server's json.loads reads as floats
        r = httpx.post(sim.base_url + "/v1/chat/completions", timeout=10, content=json.dumps({
            "model": "m", "messages": USER, "stream": stream, "simulator": override}))
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["param"] == "simulator"
        assert "simulator" in err["message"]
        assert not _log_errors(caplog)
        assert sim.truth == []  # refused before it became a request

    @pytest.mark.parametrize("path,body", ROUTES, ids=[p for p, _ in ROUTES])
    def test_every_route_answers_in_its_shape(self, sim, caplog, path, body) -> None:
        for override in ({"output_tps": 0}, {"tokens_per_chunk": 0}, {"jitter": math.inf}):
            r = httpx.post(sim.base_url + path, timeout=10,
                           content=json.dumps({**body, "simulator": override}).replace(
                               "Infinity", "1e999"))
            assert r.status_code == 400, r.text
            data = r.json()
            if path.startswith("/v1/messages"):
                assert data["type"] == "error"
                assert data["error"]["type"] == "invalid_request_error"
            elif ":" in path:
                assert data["error"]["status"] == "INVALID_ARGUMENT"
            else:
                assert data["error"]["type"] == "invalid_request_error"
        assert not _log_errors(caplog)

    def test_responses_websocket_answers_an_error_event(self, sim) -> None:
        websockets = pytest.importorskip("websockets.sync.client")
        url = sim.base_url.replace("http://", "ws://") + "/v1/responses"
        with websockets.connect(url) as ws:
            ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi",
                                "simulator": {"output_tps": 0}}))
            event = json.loads(ws.recv(timeout=10))
        assert event["type"] == "error" and event["status"] == 400

    def test_good_overrides_still_apply(self, sim) -> None:
        r = httpx.post(sim.base_url + "/v1/chat/completions", timeout=10, json={
            "model": "m", "messages": USER, "simulator": {
                "output_tokens": 7, "tokens_per_chunk": 3, "output_tps": 1e4, "jitter": 0.5,
                "queue_ms": 0, "fault": None}})
        assert r.status_code == 200
        assert r.json()["usage"]["completion_tokens"] == 7


class TestBadBodies:
    """Fields of the wrong type anywhere a parser looks get a 400, not a 500."""

    @pytest.mark.parametrize("path,body", ROUTES, ids=[p for p, _ in ROUTES])
    def test_wrong_types(self, sim, caplog, path, body) -> None:
        bad_fields = {"tool_choice": "auto", "text": "plain", "response_format": {
            "type": "json_schema", "json_schema": {"schema": "x"}},
            "toolConfig": "any", "max_tokens": -1, "max_output_tokens": True,
            "generationConfig": {"maxOutputTokens": -3}}
        for field, value in bad_fields.items():
            r = httpx.post(sim.base_url + path, timeout=10, json={**body, field: value})
            assert r.status_code in (200, 400), (field, r.status_code, r.text)
        assert not _log_errors(caplog)


class TestBadScripts:
    """A script with an unusable number is refused when it is loaded, not per request."""

    @pytest.mark.parametrize("turn", [{"output_tps": 0}, {"tokens_per_chunk": 0},
                                      {"fault": "nope"}, {"content": 5},
                                      {"tool_calls": [{"arguments": {}}]}], ids=repr)
    def test_refused_at_start(self, turn) -> None:
        with pytest.raises(ValueError, match="script turn 0"):
            Simulator(SimulatorConfig(script={"turns": [turn]})).start()


class TestBadFlags:
    """A bad number on the command line is one ``error:`` line and exit status 2."""

    @pytest.mark.parametrize("argv", [
        ["--prefill-tps", "nan"], ["--output-tps", "inf"], ["--output-tps", "0"],
        ["--prefill-tps", "-1"], ["--port", "99999"], ["--port", "-1"],
        ["--tokens-per-chunk", "0"], ["--jitter", "nan"], ["--queue-ms", "-5"],
        ["--rtt-ms", "nan"], ["--max-batch", "0"], ["--output-tokens", "-1"],
        ["--spin-us", "inf"], ["--fault", "rate_limit:p=2"], ["--fault", "cut:after=inf"],
        ["--fault", "slow_headers:delay_ms=nan"], ["--truth", "/proc/forbidden/truth.jsonl"],
    ], ids=" ".join)
    def test_refused(self, argv, capsys, monkeypatch) -> None:
        def serve_instead(coro):  # type: ignore[no-untyped-def]
            coro.close()
            raise AssertionError(f"{argv} was accepted: the simulator would start")

        monkeypatch.setattr("agent_latency.simulator._cli.asyncio.run", serve_instead)
        assert main([*argv, "--port", "0"] if "--port" not in argv else argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("agent-latency simulate: error: "), err

    def test_refused_by_the_real_command(self, tmp_path) -> None:
        for argv in (["--port", "99999"], ["--prefill-tps", "nan"],
                     ["--truth", str(tmp_path / "missing" / "dir" / "t.jsonl")]):
            proc = subprocess.run([sys.executable, "-m", "agent_latency.simulator", *argv],
                                  check=False, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 2, proc.stderr
            assert "Traceback" not in proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr

    def test_python_api_refuses_too(self) -> None:
        with pytest.raises(ValueError, match="--prefill-tps"):
            Simulator(SimulatorConfig(prefill_tps=math.nan)).start()


def _hang_up_after_sending(base_url: str, body: dict) -> None:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    raw = json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     + f"Content-Length: {len(raw)}\r\n\r\n".encode() + raw)
        time.sleep(0.05)  # the body is in; the server is queueing it


class TestClientDisconnect:
    """A client that hangs up before the headers leaves no traceback and a 499 record."""

    @pytest.mark.parametrize("stream", [False, True])
    @pytest.mark.parametrize("hold", [{"queue_ms": 300}, {"fault": "slow_headers:delay_ms=300"}],
                             ids=["queue", "slow_headers"])
    def test_silent(self, sim, caplog, stream, hold) -> None:
        caplog.set_level(logging.INFO)
        _hang_up_after_sending(sim.base_url, {"model": "m", "messages": USER, "stream": stream,
                                              "simulator": {"output_tokens": 200, **hold}})
        records = sim.wait_truth(1, timeout=10)
        time.sleep(0.2)  # anything logged after the record
        assert len(records) == 1 and records[0]["status"] == 499
        assert not _log_errors(caplog), [r.getMessage() for r in caplog.records]

    def test_silent_in_the_command(self, tmp_path) -> None:
        from agent_latency.simulator import SimulatorProcess

        with SimulatorProcess(SimulatorConfig(port=0, prefill_tps=1e6)) as proc:
            for stream in (False, True):
                _hang_up_after_sending(proc.base_url, {
                    "model": "m", "messages": USER, "stream": stream,
                    "simulator": {"queue_ms": 300, "output_tokens": 200}})
            deadline = time.monotonic() + 10
            while len(proc.truth) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.2)
            stderr = proc.stderr
        assert "Traceback" not in stderr and "Error" not in stderr, stderr

    def test_silent_while_the_body_is_read(self, sim, caplog) -> None:
        caplog.set_level(logging.INFO)
        host, port = sim.base_url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                         b'{"model": "m", "messages": [')
            time.sleep(0.1)
        time.sleep(0.3)
        assert not _log_errors(caplog), [r.getMessage() for r in caplog.records]
