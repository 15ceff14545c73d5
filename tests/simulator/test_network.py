"""Network delay: the userspace proxy (--rtt-ms) and, as root, the kernel NFQUEUE mode."""

from __future__ import annotations

import socket
import time

import pytest

from agent_latency.simulator import kernel_delay_unavailable

from .conftest import busy_slack

REQUEST = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def _timings(port: int) -> tuple[float, float, float]:
    """(connect, first response after connect, response on the reused connection)."""
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    t1 = time.perf_counter()
    s.sendall(REQUEST)
    s.recv(4096)
    t2 = time.perf_counter()
    s.sendall(REQUEST)
    s.recv(4096)
    t3 = time.perf_counter()
    s.close()
    return t1 - t0, t2 - t1, t3 - t2


class TestDelayProxy:
    """Each direction pays RTT/2; a new connection's first bytes also pay the handshake."""

    def test_round_trips(self, make_sim) -> None:
        slack = busy_slack()  # upper bounds only: the delays are lower bounds
        sim = make_sim(rtt_ms=30.0)
        connect, first, reused = _timings(sim.port)
        assert connect < 0.01 + slack  # the kernel completes the handshake with the proxy
        assert 0.055 <= first < 0.09 + slack  # handshake RTT + request/response RTT
        assert 0.028 <= reused < 0.06 + slack

    def test_without_connect_penalty(self, make_sim) -> None:
        slack = busy_slack()  # upper bounds only: the delays are lower bounds
        sim = make_sim(rtt_ms=30.0, connect_penalty=False)
        _, first, _ = _timings(sim.port)
        assert 0.028 <= first < 0.06 + slack

    def test_sdk_through_proxy(self, make_sim) -> None:
        openai = pytest.importorskip("openai")
        sim = make_sim(rtt_ms=20.0)
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
        t0 = time.perf_counter()
        r = client.chat.completions.create(model="m", max_tokens=3,
                                           messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content == "lorem ipsum dolor"
        assert time.perf_counter() - t0 >= 0.04
        assert sim.wait_truth(1)[0]["rtt_s"] == pytest.approx(0.02)


@pytest.mark.skipif(kernel_delay_unavailable() is not None,
                    reason=f"kernel delay unavailable: {kernel_delay_unavailable()}")
class TestKernelDelay:
    """NFQUEUE delays the SYN, SYN-ACK and every packet on the simulator's port."""

    def test_connect_and_round_trip_pay_the_delay(self, make_sim) -> None:
        slack = busy_slack()  # upper bounds only: the delays are lower bounds
        sim = make_sim(rtt_ms=20.0, kernel_delay=True)
        connect, first, reused = _timings(sim.port)
        assert 0.018 <= connect < 0.04 + slack
        assert 0.018 <= first < 0.045 + slack
        assert 0.018 <= reused < 0.045 + slack

    def test_other_ports_are_not_delayed(self, make_sim) -> None:
        slack = busy_slack()  # upper bounds only: the delays are lower bounds
        make_sim(rtt_ms=40.0, kernel_delay=True)
        other = make_sim()
        connect, first, _ = _timings(other.port)
        assert connect < 0.01 + slack and first < 0.02 + slack
