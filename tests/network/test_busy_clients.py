"""Arrival times on the aiohttp and requests/urllib3 stacks: a client that is away as the first
token lands (its event loop blocked, its thread asleep) still has its first and last tokens
dated from the wire, and the wait is the client's lag, not prefill.

The simulator runs in its own process with its truth log on (TLS through a forwarder of its
own process); each case checks that the first token really landed while the client was away
before comparing, and the bounds are generous (max(10 ms, 5 %) plus the machine's load
slack) against a hand-over time that is hundreds of milliseconds off."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp_streams import open_stream
from machine_load import busy_slack
from truth_log import close, received_at, truth_of

from agent_latency import semconv
from agent_latency.instrumentation.llm import _rates
from agent_latency.instrumentation.net import _aiohttp, _urllib3
from agent_latency.simulator import SimulatorConfig, SimulatorProcess

# quiet: the client's own lag is the measurement; other tests on the cores would add theirs
# (make test runs it alone).
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="arrival times come from Linux's receive stamps"),
              pytest.mark.quiet]

requests = pytest.importorskip("requests")
aiohttp = pytest.importorskip("aiohttp")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the internet
try:
    import litellm
except ImportError:  # the older SDK line's environment has none
    litellm = None

from agent_latency.instrumentation.llm import Settings  # noqa: E402
from agent_latency.instrumentation.llm._invoke import call_wrapper  # noqa: E402
from agent_latency.instrumentation.llm.openai import CHAT, OpenAIInstrumentor  # noqa: E402
from agent_latency.instrumentation.llm.requests import RequestsInstrumentor  # noqa: E402

PREFILL_TPS = 5000.0
OUTPUT_TPS = 100.0
# ~2,000 input tokens: ~0.4 s of prefill; the client is away for 0.8 s from the request.
MESSAGES = [{"role": "user", "content": "measure " * 1000}]
AWAY = 0.8
# 80 tokens, 0.8 s of output: the stream goes on after the client is back, so the later
# tokens show the server's pace (what a sync reader's coalesced first token is dated from).
OUTPUT_TOKENS = 80

# The forwarder is the TLS stream's network: bytes it relays late reach the client late.  It
# prints when it relayed each piece that holds an output token (an event with content), so
# a test compares with what the client's wire carried, not only with the server's truth (on
# a loaded machine this process once waited 0.39 s for the CPU: issue 30).
FORWARDER = """
import asyncio, ssl, sys, time
target, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
OUTPUT = b'"delta": {"content": "'
async def pipe(reader, writer, down=False):
    tail = b""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            if down:
                if OUTPUT in tail + data:
                    print(time.monotonic(), flush=True)
                tail = data[-64:]
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()
async def handle(reader, writer):
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer, True))
async def main():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorProcess]:
    with SimulatorProcess(SimulatorConfig(port=0, prefill_tps=PREFILL_TPS,
                                          output_tps=OUTPUT_TPS)) as server:
        yield server


#: When the TLS forwarder relayed pieces holding output tokens (``time.monotonic()``).
RELAYED: list[float] = []


def _read_relays(stdout: Any) -> None:
    for line in stdout:
        RELAYED.append(float(line))


def on_the_wire(truth: dict[str, Any], secure: bool) -> tuple[float, float]:
    """When the first and last output tokens reached the client's side of the network: as
    the server sent them, or later where the TLS forwarder relayed them later."""
    first, last = truth["first_token_at_mono"], truth["last_token_at_mono"]
    if not secure:
        return first, last
    relayed = [t for t in RELAYED if truth["started_at_mono"] <= t]
    if relayed:
        first, last = max(first, relayed[0]), max(last, relayed[-1])
    return first, last


@pytest.fixture(scope="module")
def tls_base(sim: SimulatorProcess, tls_files: tuple[Path, Path]) -> Iterator[str]:
    """``https://localhost:PORT``: a TLS forwarder to the simulator, in a process of its own
    (a forwarder sharing the client's GIL would hold the bytes while the client is busy)."""
    cert, key = tls_files
    target = sim.base_url.rpartition(":")[2]
    forwarder = subprocess.Popen([sys.executable, "-c", FORWARDER, target, str(cert), str(key)],
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert forwarder.stdout is not None
        port = forwarder.stdout.readline().strip()
        assert port, "the TLS forwarder did not start"
        relays = threading.Thread(target=_read_relays, args=(forwarder.stdout,), daemon=True)
        relays.start()
        yield f"https://localhost:{port}"
    finally:
        forwarder.terminate()
        forwarder.wait(10)


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    # (every LLM instrumentor but requests' brings the aiohttp patch)
    instrumentors: list[Any] = [RequestsInstrumentor(), OpenAIInstrumentor()]
    if litellm is not None:
        from agent_latency.instrumentation.llm.litellm import LiteLLMInstrumentor

        instrumentors.append(LiteLLMInstrumentor())
    for instrumentor in instrumentors:
        instrumentor.instrument()
    yield
    for instrumentor in reversed(instrumentors):
        instrumentor.uninstrument()


@pytest.fixture(autouse=True)
def _fresh_rates() -> Iterator[None]:
    _rates.clear()
    yield


@pytest.fixture
def followed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The client stacks whose connections arrival times were taken on, in order."""
    seen: list[str] = []
    for module, name in ((_aiohttp, "aiohttp"), (_urllib3, "urllib3")):
        original = module.follow

        def spy(attempt: Any, classify: Any = None, *, _original: Callable[..., Any] = original,
                _name: str = name, **kwargs: Any) -> Any:
            following = _original(attempt, classify, **kwargs)
            if following is not None:
                seen.append(_name)
            return following

        monkeypatch.setattr(module, "follow", spy)
    return seen


def one_call(otel: Any) -> Any:
    calls = [s for s in otel.spans() if semconv.LLM_PREFILL in (s.attributes or {})]
    assert len(calls) == 1, [s.name for s in calls]
    return calls[0]


def check(otel: Any, sim: SimulatorProcess, away: tuple[float, float],
          secure: bool = False) -> dict[str, Any]:
    """The call's first token landed while the client was away; its prefill and output
    generation are the server's, dated from the wire; the wait is the client's lag."""
    a = one_call(otel).attributes
    truth = truth_of(sim, a[semconv.LLM_SERVER_REQUEST_ID])
    first, last = on_the_wire(truth, secure)
    # The wait checked below is meant to be long: a server late by most of the time away
    # leaves too short a one to test.
    if not away[0] < first < away[1] - 0.2:
        pytest.skip("the first token did not land while the client was away (0.2 s before "
                    "its return)")
    prefill = first - received_at(truth)
    output = last - first
    seen = {k: v for k, v in a.items() if k.startswith("agent_latency.llm.")}
    sources = (a[semconv.LLM_FIRST_TOKEN_SOURCE], a[semconv.LLM_LAST_TOKEN_SOURCE])
    # The first token came while nobody read: a kernel stamp, or dated back from one.  The
    # last came once the client was back and waiting: a read may have taken it first.
    assert sources[0] in ("measured", "estimated"), sources
    assert sources[1] in ("measured", "estimated", "read"), sources
    assert close(a[semconv.LLM_PREFILL], prefill), (
        a[semconv.LLM_PREFILL], prefill, truth["first_token_at_mono"] - received_at(truth),
        seen)
    assert close(a[semconv.LLM_OUTPUT_GENERATION], output), (
        a[semconv.LLM_OUTPUT_GENERATION], output, seen)
    # The hand-over came after the client was back: hundreds of milliseconds late, all of
    # it the client's.
    waited = away[1] - first
    assert waited > 0.2
    assert a[semconv.LLM_CLIENT_LAG] >= waited - max(0.010, 0.05 * prefill) - busy_slack(), (
        a[semconv.LLM_CLIENT_LAG], waited)
    return a


def away() -> tuple[float, float]:
    started = time.perf_counter()
    time.sleep(AWAY)
    return started, time.perf_counter()


class TestRequests:
    """A streamed ``requests.post`` whose thread sleeps as the first token lands: the
    tokens the kernel coalesced meanwhile are dated back from the newest stamp at the pace
    of the later ones."""

    @pytest.mark.parametrize("secure", [False, True], ids=["http", "tls"])
    def test_thread_away_during_prefill(self, otel: Any, sim: SimulatorProcess,
                                        followed: list[str], secure: bool,
                                        request: pytest.FixtureRequest) -> None:
        if secure:
            base = request.getfixturevalue("tls_base")
            verify: Any = str(request.getfixturevalue("tls_files")[0])
        else:
            base, verify = sim.base_url, True
        response = requests.post(f"{base}/v1/chat/completions", stream=True, timeout=30,
                                 verify=verify,
                                 json={"model": "sim-requests", "messages": MESSAGES,
                                       "max_tokens": OUTPUT_TOKENS, "stream": True})
        window = away()
        lines = [line for line in response.iter_lines() if line.startswith(b"data:")]
        assert lines[-1] == b"data: [DONE]"
        assert followed == ["urllib3"]
        check(otel, sim, window, secure)

    def test_preempted_as_following_begins(self, otel: Any, sim: SimulatorProcess,
                                           followed: list[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
        """The thread loses the CPU as it starts following the connection (between the
        received count and the queue's length), and the response's head and opening event
        land meanwhile: the first token is still dated from its own bytes, not at the head
        (CI, on a machine busy with three suites: prefill 5.8 ms for 0.405 s)."""
        from agent_latency.instrumentation.net import _arrivals

        real_queued = _arrivals._queued
        preempted: list[bool] = []

        def preempting(fd: int) -> int:
            if not preempted:
                preempted.append(True)
                time.sleep(0.05)
            return real_queued(fd)

        monkeypatch.setattr(_arrivals, "_queued", preempting)
        response = requests.post(f"{sim.base_url}/v1/chat/completions", stream=True,
                                 timeout=30,
                                 json={"model": "sim-requests", "messages": MESSAGES,
                                       "max_tokens": OUTPUT_TOKENS, "stream": True})
        window = away()
        lines = [line for line in response.iter_lines() if line.startswith(b"data:")]
        assert lines[-1] == b"data: [DONE]"
        assert preempted and followed == ["urllib3"]
        check(otel, sim, window)

    def test_a_read_timeout_stays_the_library_s(self, otel: Any, sim: SimulatorProcess,
                                                 followed: list[str]) -> None:
        """The tap waits for the socket itself: the read's timeout is raised when it
        expires (the socket's own, as requests raises it), not after a second wait."""
        # ~1.6 s of prefill, a 0.4 s read timeout: a second wait would take 0.8 s.
        response = requests.post(f"{sim.base_url}/v1/chat/completions", stream=True,
                                 timeout=(10, 0.4),
                                 json={"model": "sim-requests-timeout", "max_tokens": 5,
                                       "messages": [{"role": "user",
                                                     "content": "measure " * 4000}],
                                       "stream": True})
        started = time.perf_counter()
        with pytest.raises(requests.exceptions.ConnectionError, match="timed out"):
            for _ in response.iter_lines():
                pass
        took = time.perf_counter() - started
        assert followed == ["urllib3"]
        assert 0.39 <= took < 0.6 + busy_slack(), took
        a = one_call(otel).attributes
        assert a[semconv.ERROR_TYPE]

    def test_body_read_inside_the_call(self, otel: Any, sim: SimulatorProcess,
                                       followed: list[str]) -> None:
        """Not streamed: the body's last byte is dated from the wire (the call's network
        tail is what the kernel saw, not when ``requests`` finished parsing)."""
        response = requests.post(f"{sim.base_url}/v1/chat/completions", timeout=30,
                                 json={"model": "sim-requests-body", "messages": MESSAGES,
                                       "max_tokens": 5})
        assert response.json()["usage"]["completion_tokens"] == 5
        assert followed == ["urllib3"]
        a = one_call(otel).attributes
        truth = truth_of(sim, a[semconv.LLM_SERVER_REQUEST_ID])
        server = truth["last_token_at_mono"] - received_at(truth)
        ours = a[semconv.LLM_PREFILL] + a[semconv.LLM_OUTPUT_GENERATION]
        assert close(ours, server), (ours, server)


def all_calls(otel: Any) -> list[dict[str, Any]]:
    return [dict(s.attributes or {}) for s in sorted(otel.spans(), key=lambda s: s.start_time)
            if semconv.LLM_PREFILL in (s.attributes or {})]


def tapped_again(otel: Any, followed: list[str], stack: str) -> None:
    """Two streams on one pooled connection: the first call's tap was taken off, so the
    second's went on, and both have wire times."""
    assert followed == [stack, stack]
    first, second = all_calls(otel)
    assert second[semconv.LLM_CONNECTION_REUSED] is True
    for a in (first, second):
        assert a[semconv.LLM_FIRST_TOKEN_SOURCE] != "handed-over", a


class TestPooledConnections:
    """A connection's tap lasts one call: the next call on the pooled connection taps it
    again."""

    def test_requests_session(self, otel: Any, sim: SimulatorProcess,
                              followed: list[str]) -> None:
        with requests.Session() as session:
            for n in range(2):
                response = session.post(f"{sim.base_url}/v1/chat/completions", stream=True,
                                        timeout=30,
                                        json={"model": f"sim-pooled-{n}", "max_tokens": 5,
                                              "messages": [{"role": "user", "content": "hi"}],
                                              "stream": True})
                assert list(response.iter_lines())
        tapped_again(otel, followed, "urllib3")

    def test_aiohttp_session(self, otel: Any, sim: SimulatorProcess,
                             followed: list[str]) -> None:
        wrapper = call_wrapper(CHAT, Settings())

        async def run() -> None:
            async with aiohttp.ClientSession() as session:
                for n in range(2):
                    stream = await wrapper(open_stream, None,
                                           (session, f"{sim.base_url}/v1/chat/completions"),
                                           {"model": f"sim-pooled-{n}", "max_tokens": 5,
                                            "messages": [{"role": "user", "content": "hi"}],
                                            "stream": True})
                    async for _ in stream:
                        pass

        asyncio.run(run())
        tapped_again(otel, followed, "aiohttp")


class TestAiohttp:
    """aiohttp streams whose event loop is blocked as the first token lands: the watcher
    stamps the arrivals meanwhile."""

    @pytest.mark.parametrize("secure", [False, True],
                             ids=["http", "tls"])
    def test_plain_client(self, otel: Any, sim: SimulatorProcess, followed: list[str],
                          secure: bool, request: pytest.FixtureRequest) -> None:
        """A program's own aiohttp client, read as the openai SDK's chat stream."""
        if secure:
            base = request.getfixturevalue("tls_base")
            context: Any = ssl.create_default_context(
                cafile=str(request.getfixturevalue("tls_files")[0]))
        else:
            base, context = sim.base_url, None
        wrapper = call_wrapper(CHAT, Settings())
        window: list[tuple[float, float]] = []

        async def run() -> None:
            async with aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(ssl=context)) as session:
                stream = await wrapper(open_stream, None,
                                       (session, f"{base}/v1/chat/completions"),
                                       {"model": "sim-aiohttp-plain", "messages": MESSAGES,
                                        "max_tokens": OUTPUT_TOKENS, "stream": True})
                window.append(away())  # blocks the loop past the first token
                async for _ in stream:
                    pass

        asyncio.run(run())
        assert followed == ["aiohttp"]
        check(otel, sim, window[0], secure)

    @pytest.mark.skipif(litellm is None, reason="litellm is not installed")
    @pytest.mark.parametrize("secure", [False, True],
                             ids=["http", "tls"])
    def test_litellm_acompletion(self, otel: Any, sim: SimulatorProcess,
                                 followed: list[str], secure: bool,
                                 request: pytest.FixtureRequest,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """litellm's ``acompletion``: its httpx client runs on an aiohttp transport."""
        if secure:
            base = request.getfixturevalue("tls_base")
            monkeypatch.setattr(litellm, "ssl_verify",
                                str(request.getfixturevalue("tls_files")[0]))
        else:
            base = sim.base_url
        window: list[tuple[float, float]] = []

        async def run() -> None:
            # litellm's first call in a process takes longer than the prefill (imports, its
            # clients built): a warm-up under another model name.
            async for _ in await litellm.acompletion(
                    model="openai/sim-warm-up", api_base=f"{base}/v1", api_key="k",
                    messages=[{"role": "user", "content": "hi"}], max_tokens=2, stream=True):
                pass
            otel.exporter.clear()
            del followed[:]
            stream = await litellm.acompletion(
                model="openai/sim-aiohttp", api_base=f"{base}/v1", api_key="k",
                messages=MESSAGES, max_tokens=OUTPUT_TOKENS, stream=True)
            window.append(away())  # blocks the loop past the first token
            async for _ in stream:
                pass

        asyncio.run(run())
        assert followed == ["aiohttp"]
        check(otel, sim, window[0], secure)


class TestHttpxTLS:
    """The openai SDK's async client over TLS with its loop blocked as the first token lands:
    the loop then takes every queued byte at once and anyio's TLS stream hands them over a
    record per read, so a read's wire bytes are the kernel's count less what still waits
    above the socket (dated from the whole backlog, the first token came out 390 ms late)."""

    @pytest.mark.parametrize("flavour", ["httpx", "httpx2"])
    def test_loop_blocked_during_prefill(self, otel: Any, sim: SimulatorProcess,
                                         tls_base: str, tls_files: tuple[Path, Path],
                                         flavour: str) -> None:
        openai = pytest.importorskip("openai")
        http = pytest.importorskip(flavour)
        window: list[tuple[float, float]] = []

        async def run() -> None:
            context = ssl.create_default_context(cafile=str(tls_files[0]))
            async with http.AsyncClient(verify=context) as http_client:
                client = openai.AsyncOpenAI(base_url=f"{tls_base}/v1", api_key="k",
                                            max_retries=0, http_client=http_client)
                stream = await client.chat.completions.create(
                    model=f"sim-{flavour}-tls", messages=MESSAGES, max_tokens=OUTPUT_TOKENS,
                    stream=True)
                window.append(away())  # blocks the loop past the first token
                async for _ in stream:
                    pass

        asyncio.run(run())
        check(otel, sim, window[0], secure=True)
