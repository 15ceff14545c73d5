"""What the callgrind benchmarks share: running a worker under callgrind, its batches
with the instrumentation on and off, reading the totals of its dumps.

Only the worker's main thread is counted (``--separate-threads=yes``, the main thread's
files only): the work measured is what the program's own thread runs, not the background
threads' wake-ups (the arrival watcher's epoll wake-ups and quiet ticks, an export worker,
timers), whose count depends on how the wire's timing falls against a client that
valgrind slows ~50x, and moved the per-chunk slope by ~2x between runs."""

from __future__ import annotations

import fcntl
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit


def available() -> bool:
    """Whether valgrind's callgrind (and its ``callgrind_control``) is installed; says so
    when not."""
    if shutil.which("valgrind") and shutil.which("callgrind_control"):
        return True
    print("valgrind (callgrind) is not installed", file=sys.stderr)
    return False


def dump(tag: str) -> None:
    """In a worker running under callgrind: dump its counters now, under ``tag`` (what it
    ran since the last dump)."""
    subprocess.run(["callgrind_control", "-d", tag, str(os.getpid())],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def simulator() -> Any:
    """The simulator as the instruction benchmarks run it (a context manager with a
    ``base_url``): as fast as it goes, so the client's own work is all there is to count;
    200 output tokens by default; behind :class:`EventPerRead`, so every stream is read the
    same way."""
    from agent_latency.simulator import SimulatorConfig, SimulatorProcess

    return EventPerRead(SimulatorProcess(SimulatorConfig(
        port=0, prefill_tps=1e7, output_tps=1e6, spin_us=0.0, default_output_tokens=200)))


class EventPerRead:
    """A relay in front of a local server (a context manager around the server's own) that
    makes the client read a stream one event at a time, as a client keeping up with a
    streaming server does: each chunk of a chunked response (the simulator writes one event
    a chunk) is sent once the client has read everything sent before it; a response with a
    ``Content-Length`` is sent whole.

    Without it, a client that valgrind slows ~50x finds a fast local server's events
    coalesced into its reads, and how many fall into each read depends on when the server's
    writes land: one read of the whole stream in one batch, a few in the next.  Each read
    is the SDK's work, and the events of the read that holds a stream's first token are
    counted for its arrival time (~1,000 instructions an event in C), so the per-chunk
    slope moved by thousands of instructions between batches and runs.  One event a read
    leaves the per-chunk path alone (the library's per-chunk work; the SDK's own per read,
    the same with the library on and off).

    "Read" is seen from outside the client: its socket's receive queue, empty in
    ``/proc/net/tcp`` once the chunk sent is acknowledged (Linux)."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._listener: socket.socket | None = None
        self._upstream = ("127.0.0.1", 80)
        self.base_url = ""

    def __enter__(self) -> EventPerRead:
        self._server.__enter__()
        upstream = urlsplit(self._server.base_url)
        self._upstream = (upstream.hostname or "127.0.0.1", upstream.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._listener is not None:
            self._listener.close()
        self._server.__exit__(*exc)

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._upstream)
            except OSError:
                return
            threading.Thread(target=_pipe, args=(client, server), daemon=True).start()
            threading.Thread(target=_responses, args=(server, client), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Requests, passed on as they come."""
    try:
        while data := source.recv(1 << 16):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _responses(server: socket.socket, client: socket.socket) -> None:
    """Responses: a chunked one a chunk per client read, any other whole."""
    reader = server.makefile("rb")
    port = client.getpeername()[1]
    try:
        while head := _through_blank(reader):
            fields = {name.strip().lower(): value.strip() for name, _, value in
                      (line.decode("latin-1").partition(":")
                       for line in head.split(b"\r\n")[1:])}
            if fields.get("transfer-encoding", "").lower() != "chunked":
                length = fields.get("content-length")
                client.sendall(head + (reader.read(int(length)) if length is not None
                                       else reader.read()))
                continue
            piece = head
            while True:
                size_line = reader.readline()
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    client.sendall(piece + size_line + _through_blank(reader))
                    break
                client.sendall(piece + size_line + reader.read(size + 2))
                _wait_read(client, port)
                piece = b""
        client.shutdown(socket.SHUT_WR)
    except (OSError, ValueError):
        pass
    finally:
        reader.close()


def _through_blank(reader: Any) -> bytes:
    """Lines up to and including a blank one (a response's head, a chunked body's
    trailer), or b"" at the end of the connection."""
    head = b""
    while line := reader.readline():
        head += line
        if line in (b"\r\n", b"\n"):
            break
    return head


_SIOCOUTQ = 0x5411  # bytes sent and not yet acknowledged


def _wait_read(client: socket.socket, port: int, timeout: float = 10.0) -> None:
    """Until the client has read all that was sent to it: acknowledged by its kernel, and
    its socket's receive queue (``rx_queue`` in ``/proc/net/tcp``) empty."""
    deadline = time.monotonic() + timeout
    local = f":{port:04X}"
    while time.monotonic() < deadline:
        unacked = int.from_bytes(fcntl.ioctl(client.fileno(), _SIOCOUTQ, b"\0" * 4), "little")
        if not unacked and _receive_queue(local) == 0:
            return
        time.sleep(0.0002)


def _receive_queue(local: str) -> int | None:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[1].endswith(local) and fields[3] == "01":
                        return int(fields[4].split(":")[1], 16)
        except OSError:
            continue
    return None


def run(script: str, args: list[str], tags: list[str],
        env: dict[str, str] | None = None, keep: str | None = None) -> dict[str, int] | None:
    """Run ``script`` (a benchmark's worker) with ``args`` under callgrind: the instructions
    of each of its dumps by tag, or None (its error printed) when it failed or a dump in
    ``tags`` is missing.  ``keep``: a folder the dumps are left in, for :func:`functions`
    (their names written out whole, so that each dump reads on its own)."""
    folder = keep or tempfile.mkdtemp(prefix="callgrind-")
    whole_names = ["--compress-strings=no", "--compress-pos=no"] if keep else []
    try:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--separate-threads=yes", *whole_names,
             f"--callgrind-out-file={folder}/cg.%p", sys.executable, script, *args],
            capture_output=True, text=True, timeout=3600, env=env, check=False)
        found = counts(folder)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    if proc.returncode != 0 or not all(tag in found for tag in tags):
        print(f"{' '.join(args)} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return found


def counts(folder: str) -> dict[str, int]:
    """The main thread's total instructions per dump in ``folder``, by the tag each dump was
    triggered with (a file per thread and dump: ``cg.PID.PART-THREAD``, the main thread 01)."""
    out = {}
    for path in glob.glob(os.path.join(folder, "cg.*-01")):
        tag, total = None, None
        with open(path) as f:
            for line in f:
                if line.startswith("desc: Trigger: "):
                    tag = line.rsplit(" ", 1)[-1].strip()
                elif line.startswith(("summary:", "totals:")) and total is None:
                    total = int(line.split()[1])
        if tag and total is not None:
            out[tag] = total
    return out


def on_off(toggle: Callable[[bool], None], kinds: Iterable[str], n: int,
           run: Callable[[str], None]) -> None:
    """In a worker, after its warm-up: ``n`` runs of each kind with the instrumentation on
    (``toggle(True)``), then ``n`` with it off, each batch dumped as ``KIND-on`` or
    ``KIND-off`` (``warm`` first: what ran before is never counted).  Each toggle is dumped
    on its own (``toggle-on``, ``toggle-off``, not read): ``uninstrument()`` costs a library
    up to a few million instructions, which counted in the first batch after it would come
    off that batch's runs (as the program's own work, making the library's look smaller)."""
    dump("warm")
    for on in (True, False):
        toggle(on)
        dump(f"toggle-{'on' if on else 'off'}")
        for kind in kinds:
            for _ in range(n):
                run(kind)
            dump(f"{kind}-{'on' if on else 'off'}")


def on_off_tags(kinds: Iterable[str]) -> list[str]:
    """The dumps :func:`on_off` makes."""
    return [f"{kind}-{state}" for kind in kinds for state in ("on", "off")]


def per_run(found: dict[str, int], n: int, kinds: Iterable[str]) -> tuple[dict[str, float],
                                                                        dict[str, float]]:
    """From :func:`on_off`'s dumps: the program's own instructions per run of each kind
    (off) and what the instrumentation adds to one (on less off)."""
    own = {kind: found[f"{kind}-off"] / n for kind in kinds}
    added = {kind: found[f"{kind}-on"] / n - own[kind] for kind in kinds}
    return own, added


def functions(folder: str, tag: str, *, inclusive: bool) -> dict[str, int]:
    """Instructions per function (``file:function``) in the main thread's dump ``tag`` of a
    :func:`run` with ``keep``, self or inclusive, read with ``callgrind_annotate``.  The
    frames that were running across the dump (``main``, the interpreter's outer loop) carry
    the dump's whole total."""
    path = next(p for p in glob.glob(os.path.join(folder, "cg.*-01"))
                if f"Trigger: Client Request: {tag}\n" in _head(p)
                or f"Trigger: dump {tag}\n" in _head(p))
    out = subprocess.run(["callgrind_annotate", "--threshold=100",
                          f"--inclusive={'yes' if inclusive else 'no'}", path],
                         capture_output=True, text=True, check=True).stdout
    costs: dict[str, int] = {}
    for line in out.splitlines():
        match = _ANNOTATED.match(line)
        if match:
            name = match.group(2).rsplit(" [", 1)[0]
            name = _BUILD_FOLDER.sub("", name)
            costs[name] = costs.get(name, 0) + int(match.group(1).replace(",", ""))
    return costs


def top_added(folder: str, on: str, off: str, n: int, count: int = 15) -> str:
    """The functions whose instructions grew most from dump ``off`` to dump ``on`` (``n``
    runs each), per run, self and inclusive: what the instrumentation's runs execute."""
    lines = []
    for inclusive in (False, True):
        costs_on = functions(folder, on, inclusive=inclusive)
        costs_off = functions(folder, off, inclusive=inclusive)
        total = max(costs_on.values(), default=0)
        # Not the frames that span the dump, nor (inclusive) a recursion's cycle entries
        # (``name'2``: their inclusive cost counts the same work once per level).
        added = {name: (cost - costs_off.get(name, 0)) / n for name, cost in costs_on.items()
                 if cost < total and not (inclusive and "'" in name)}
        # Nor what holds more than the whole difference: a wrapper's inclusive cost holds
        # the call it wraps, which the run without it counts under other names.
        whole = (costs_on.get(_TOTALS, 0) - costs_off.get(_TOTALS, 0)) / n
        added = {name: cost for name, cost in added.items() if cost < whole}
        lines.append(f"{'inclusive' if inclusive else 'self'}: top {count} added per run")
        for name, cost in sorted(added.items(), key=lambda kv: -kv[1])[:count]:
            lines.append(f"  {cost:>+12,.0f}  {name}")
    return "\n".join(lines)


def top_added_per_chunk(folder: str, short: str, long: str, n: int, chunks: int,
                        count: int = 15) -> str:
    """The C functions (self) whose instructions per streamed chunk the instrumentation
    changed most: the slope from ``short`` to ``long`` streams (``chunks`` more chunks, ``n``
    runs each) with it on, less the same with it off.  Two processes' lists side by side
    say where their per-chunk figures part (the type attribute cache's misses:
    ``find_name_in_mro`` and the dictionary lookups it makes)."""
    costs: dict[str, dict[str, int]] = {}
    for kind in (short, long):
        for state in ("on", "off"):
            # A recursion's levels (``name'2``) are one function's self cost: a wrapper
            # moves the same work one level down.
            merged: dict[str, int] = {}
            for name, value in functions(folder, f"{kind}-{state}", inclusive=False).items():
                base = name.split("'", 1)[0]
                merged[base] = merged.get(base, 0) + value
            costs[f"{kind}-{state}"] = merged

    def slope(name: str, state: str) -> float:
        return (costs[f"{long}-{state}"].get(name, 0)
                - costs[f"{short}-{state}"].get(name, 0)) / n / chunks

    # Not the totals and the frames that span a dump (in some dump, near its whole count).
    spanning = {name for cost in costs.values() for name, value in cost.items()
                if value * 2 > max(cost.values(), default=0)}
    names = {name for cost in costs.values() for name in cost if name not in spanning}
    added = {name: slope(name, "on") - slope(name, "off") for name in names}
    lines = [f"self: top {count} changed per chunk"]
    for name, cost in sorted(added.items(), key=lambda kv: -abs(kv[1]))[:count]:
        lines.append(f"  {cost:>+12,.0f}  {name}")
    return "\n".join(lines)


def _head(path: str) -> str:
    with open(path) as f:
        return f.read(2000)


_TOTALS = "PROGRAM TOTALS"
_BUILD_FOLDER = re.compile(r"^[^:]*/Python-[\d.]+/(\./)?")  # where CPython was built
_ANNOTATED = re.compile(r"^\s*([\d,]+) \([ \d.]+%\)\s+\*?\s*(.+)$")
