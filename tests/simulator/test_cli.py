"""``agent-latency simulate`` / ``main()``: arguments, the listening line, signals."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from agent_latency.simulator import (
    SimulatorConfig,
    SimulatorProcess,
    build_parser,
    config_from_args,
    config_to_argv,
    main,
)


class TestArguments:
    """Parsing, round-tripping and refusing remote hosts."""

    def test_refuses_non_loopback(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["--host", "0.0.0.0", "--port", "0"]) == 2
        err = capsys.readouterr().err.strip()
        assert "--allow-remote" in err and len(err.splitlines()) == 1

    def test_bad_value_exits_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["--output-tps", "0"]) == 2
        assert main(["--fault", "nope"]) == 2

    def test_round_trip(self) -> None:
        cfg = SimulatorConfig(port=0, output_tps=123.0, faults=("cut:after=2",),
                              server_timing=True, rtt_ms=5.0)
        again = config_from_args(build_parser().parse_args(config_to_argv(cfg)))
        assert again == cfg


class TestProcess:
    """A child process prints its real port and stops on SIGINT/SIGTERM."""

    def test_listening_line_and_truth(self) -> None:
        httpx = pytest.importorskip("httpx")
        with SimulatorProcess(SimulatorConfig(port=0, output_tps=5000.0)) as proc:
            assert proc.base_url.startswith("http://127.0.0.1:")
            assert not proc.base_url.endswith(":0")
            assert "(prefill 5000 tok/s, output 5000 tok/s)" in proc.stderr
            r = httpx.post(proc.base_url + "/v1/chat/completions", json={
                "model": "m", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2})
            assert r.status_code == 200
            for _ in range(100):
                if proc.truth:
                    break
                import time
                time.sleep(0.02)
            assert proc.truth[0]["request_id"] == r.headers["x-request-id"]

    def test_sigterm_exits_zero(self) -> None:
        p = subprocess.Popen([sys.executable, "-m", "agent_latency.simulator", "--port", "0"],
                             stderr=subprocess.PIPE, text=True)
        assert p.stderr is not None
        assert "simulator listening on http://127.0.0.1:" in p.stderr.readline()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 0
