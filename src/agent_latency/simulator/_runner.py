"""Starting and stopping a simulator: in this event loop, in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from ._app import build_app
from ._config import SimulatorConfig
from ._kernel_delay import KernelDelay
from ._proxy import DelayProxy
from ._receive_stamps import StampedSocket, stamp_reads
from ._state import ServerState
from ._timing import AdmissionGate
from ._truth import TruthLog


def _bind_host(host: str) -> str:
    # "localhost" can bind ::1 and 127.0.0.1 on two different free ports; pin one.
    return "127.0.0.1" if host.lower() == "localhost" else host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _DatedReads(asyncio.Protocol):
    """aiohttp's protocol for one connection, behind one that dates each read
    (:meth:`ServerState.bytes_read`: when its newest byte reached the server, by the
    kernel's receive stamp where :func:`stamp_reads` could keep it); everything else is
    passed through."""

    __slots__ = ("_inner", "_stamped", "_state", "_transport")

    def __init__(self, inner: asyncio.Protocol, state: ServerState) -> None:
        self._inner = inner
        self._state = state
        self._transport: asyncio.BaseTransport | None = None
        self._stamped: StampedSocket | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._stamped = stamp_reads(transport)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        stamped = self._stamped
        arrived = stamped.arrived if stamped is not None else None
        self._state.bytes_read(self._transport,
                               arrived if arrived is not None else time.perf_counter())
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class RunningServer:
    """A started simulator inside the current event loop (see :func:`start_server`)."""

    __slots__ = ("_kernel", "_listener", "_proxy", "_runner", "port", "state", "upstream_port")

    def __init__(self, state: ServerState, runner: web.AppRunner, listener: asyncio.Server,
                 port: int, upstream_port: int, proxy: DelayProxy | None,
                 kernel: KernelDelay | None) -> None:
        self.state = state
        self._runner = runner
        self._listener = listener
        self.port = port
        self.upstream_port = upstream_port
        self._proxy = proxy
        self._kernel = kernel

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` clients should use (the proxy's port under ``--rtt-ms``)."""
        return f"http://{_url_host(_bind_host(self.state.config.host))}:{self.port}"

    async def stop(self) -> None:
        """Stop listening, drop connections, remove kernel rules."""
        if self._kernel is not None:
            self._kernel.stop()
        if self._proxy is not None:
            await self._proxy.close()
        self._listener.close()
        await self._runner.cleanup()
        self.state.clock.close()


async def start_server(config: SimulatorConfig, truth: TruthLog | None = None) -> RunningServer:
    """Start the simulator (and its delay proxy or kernel delay) in the running loop."""
    config.validate()
    state = ServerState(config, truth)
    runner = web.AppRunner(build_app(state), access_log=None, handle_signals=False,
                           shutdown_timeout=1.0)
    await runner.setup()
    host = _bind_host(config.host)
    proxy = kernel = None
    use_proxy = config.rtt_ms > 0 and not config.kernel_delay
    handlers = runner.server
    assert handlers is not None  # (set up above)
    # aiohttp's TCPSite, with each connection's protocol behind one that dates its reads.
    listener = await asyncio.get_running_loop().create_server(
        lambda: _DatedReads(handlers(), state), host, 0 if use_proxy else config.port,
        reuse_address=True)
    upstream = int(listener.sockets[0].getsockname()[1])
    port = upstream
    try:
        if use_proxy:
            proxy = DelayProxy((host, upstream), config.rtt_ms / 1000.0, state.clock,
                               config.connect_penalty)
            port = await proxy.start(host, config.port)
        elif config.kernel_delay:
            kernel = KernelDelay(upstream, config.rtt_ms / 1000.0)
            kernel.start()
    except BaseException:
        listener.close()
        await runner.cleanup()
        raise
    return RunningServer(state, runner, listener, port, upstream, proxy, kernel)


class Simulator:
    """A simulator running in a background thread with its own event loop.

    Use as a context manager::

        with Simulator(SimulatorConfig(output_tps=500)) as sim:
            client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="x")
            ...
            sim.truth  # one dict per request so far

    Keyword arguments override fields of ``config``.
    """

    __slots__ = ("_error", "_loop", "_ready", "_server", "_thread", "_truth", "config")

    def __init__(self, config: SimulatorConfig | None = None, **overrides: Any) -> None:
        self.config = (config or SimulatorConfig()).replace(**overrides)
        self._truth = TruthLog(self.config.truth_path)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: RunningServer | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> Simulator:
        """Start serving; returns once the port is bound."""
        self.config.validate()
        self._thread = threading.Thread(target=self._main, name="agent-latency-simulator",
                                        daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def _main(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            self._server = loop.run_until_complete(start_server(self.config, self._truth))
        except BaseException as exc:  # noqa: BLE001 - re-raised in start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._server.stop())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    def stop(self) -> None:
        """Stop serving and wait for the thread to end (idempotent)."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port clients connect to."""
        assert self._server is not None, "simulator not started"
        return self._server.port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``; the OpenAI SDK wants ``base_url + "/v1"``."""
        assert self._server is not None, "simulator not started"
        return self._server.base_url

    @property
    def truth(self) -> list[dict[str, Any]]:
        """Ground-truth records of the requests finished so far (a copy)."""
        return list(self._truth.records)

    def wait_truth(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until ``count`` records exist (a record lands just after the last byte)."""
        deadline = time.monotonic() + timeout
        while len(self._truth.records) < count and time.monotonic() < deadline:
            time.sleep(0.002)
        return self.truth

    @contextlib.contextmanager
    def held_admission(self, count: int, timeout: float = 30.0) -> Iterator[AdmissionGate]:
        """Hold requests before their queue until ``count`` wait, then admit them at once.

        For tests of capacity: send ``count`` concurrent requests inside the ``with``; on
        leaving it, they compete for the prefill slot and the batch from one instant,
        ``gate.opened_at_mono`` (``perf_counter``), however late their senders started.
        Raises ``TimeoutError`` if fewer than ``count`` arrive within ``timeout`` seconds
        (the held ones are let in all the same).
        """
        assert self._server is not None and self._loop is not None, "simulator not started"
        state = self._server.state
        gate = state.gate = AdmissionGate()
        opened = threading.Event()

        def open_gate() -> None:
            state.gate = None
            gate.open()
            opened.set()

        try:
            yield gate
            deadline = time.monotonic() + timeout
            while gate.waiting < count:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{gate.waiting} of {count} requests reached the gate")
                time.sleep(0.002)
        finally:
            self._loop.call_soon_threadsafe(open_gate)
            opened.wait(timeout)

    def clear_truth(self) -> None:
        """Forget the records collected so far (the truth file is left alone)."""
        self._truth.records.clear()
