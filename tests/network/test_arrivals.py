"""Arrival times from the wire: the kernel's receive and transmit stamps, the watcher, and
where events end.  The truth is the sender's own clock around its ``send`` (on loopback the
kernel stamps a segment inside the sender's call), so the bounds hold on a loaded machine."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import threading
import time
from bisect import bisect_left
from itertools import pairwise
from time import perf_counter
from typing import Any

import pytest
from loopback import CLOCK_SLACK, KERNEL_STAMPS, timed_send, within

from agent_latency.instrumentation.net import (
    ESTIMATED,
    MEASURED,
    Arrivals,
    exchanges_patch,
    follow,
    recognise_with,
)
from agent_latency.instrumentation.net._event_ends import _bytes_through
from agent_latency.instrumentation.net._watcher import WATCHER
from agent_latency.simulator._bedrock import event_message

pytestmark = KERNEL_STAMPS


def event(n: int) -> bytes:
    return f'data: {{"n": {n}}}\n\n'.encode()


def looked(arrivals: Arrivals, count: int) -> bool:
    """Sleep until the watcher has made ``count`` observations (at most 2 s): a loaded machine
    may keep it off a core a while, and the kernel's stamps do not depend on when it looks."""
    deadline = perf_counter() + 2.0
    while len(arrivals.cum) < count and perf_counter() < deadline:
        time.sleep(0.005)
    return len(arrivals.cum) >= count


def gated_writer(server: socket.socket, sends: str) -> tuple[subprocess.Popen[str], int]:
    """Another process that writes to ``server``'s socket once the returned pipe end is
    written to (its own GIL: it sends while this process's is held), running ``sends`` with
    ``s`` the socket; it prints each send's ``perf_counter`` time."""
    server_fd = os.dup(server.fileno())
    go_r, go_w = os.pipe()
    script = ("import os, socket, sys, time\n"
              "s = socket.socket(fileno=int(sys.argv[1]))\n"
              "os.read(int(sys.argv[2]), 1)\n" + sends)
    writer = subprocess.Popen([sys.executable, "-c", script, str(server_fd), str(go_r)],
                              pass_fds=(server_fd, go_r), stdout=subprocess.PIPE, text=True)
    os.close(server_fd)
    os.close(go_r)
    return writer, go_w


def _collection_of_at_least(seconds: float) -> list[list[int]]:
    """A heap whose full collection takes at least ``seconds`` here (grown until it does, up
    to 6 million objects): how long one takes depends on the machine and on what the process
    froze before (``gc.freeze``), and a test that needs arrivals to land during one must not
    find it too short to hold them."""
    heap: list[list[int]] = []
    while len(heap) < 6_000_000:
        heap.extend([i] for i in range(500_000))
        started = perf_counter()
        gc.collect()
        if perf_counter() - started >= seconds:
            break
    return heap


def receive(client: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += client.recv(4096)
    return data


class TestEventEnds:
    """Where SSE events end in the bytes a client reads, whatever the reads' boundaries."""

    def events(self, *blocks: bytes) -> list[tuple[int, bytes]]:
        listener = socket.create_server(("127.0.0.1", 0))
        with socket.create_connection(listener.getsockname()) as sock:
            arrivals = Arrivals(sock)
        listener.close()
        seen: list[bytes] = []
        arrivals.classify = lambda event: seen.append(event) or False
        arrivals.consumed = 0
        arrivals.tls = False  # wire offsets = the bytes read
        for block in blocks:
            arrivals.read(block, perf_counter())
        arrivals.scan()
        return list(zip(arrivals.ends, seen, strict=True))

    def ends(self, *blocks: bytes) -> list[int]:
        return [end for end, _ in self.events(*blocks)]

    def test_events_in_one_block(self) -> None:
        data = event(1) + event(2)
        assert self.ends(data) == [len(event(1)), len(data)]

    def test_a_separator_split_across_reads(self) -> None:
        data = event(1)
        assert self.ends(data[:-1], data[-1:]) == [len(data)]

    def test_keepalives_pings_and_done_are_not_events(self) -> None:
        data = (b": keep-alive\n\n" + b"event: ping\ndata: {}\n\n" + event(1)
                + b"data: [DONE]\n\n")
        assert self.ends(data) == [len(data) - len(b"data: [DONE]\n\n")]

    def test_chunked_framing_around_events(self) -> None:
        one, two = event(1), event(2)
        framed = (b"%x\r\n" % len(one) + one + b"\r\n" + b"%x\r\n" % len(two) + two + b"\r\n")
        first_end = framed.index(one) + len(one)
        second_end = framed.index(two) + len(two)
        assert self.ends(framed) == [first_end, second_end]

    def test_an_event_across_three_reads(self) -> None:
        data = event(12345)
        assert self.events(data[:5], data[5:12], data[12:]) == [(len(data), data)]

    def test_ndjson_lines_by_the_response_head(self) -> None:
        """A response whose head names an NDJSON type (Ollama's) has one event a JSON line;
        the head, the chunks' size lines and blank lines are none."""
        one, two = b'{"message": {"content": "a"}}\n', b'{"done": true}\n'
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        framed = head + b"%x\r\n" % len(one) + one + b"\r\n" + b"%x\r\n" % len(two) + two
        first_end = framed.index(one) + len(one)
        cut = first_end - 5  # a line split across reads
        assert self.events(framed[:cut], framed[cut:] + b"\r\n0\r\n\r\n") == [
            (first_end, one[:-1]), (len(framed), two[:-1])]

    def test_sse_where_the_head_names_no_ndjson_type(self) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
        data = head + b'{"not": "an event"}\n' + event(1)
        assert self.ends(data) == [len(data)]

    def test_event_stream_messages_under_chunks(self) -> None:
        """The AWS event stream (Bedrock's): each binary message is an event, found by its
        length prefix in the chunked body, wherever the chunks and the reads cut it."""
        one = event_message("messageStart", b'{"role": "assistant"}')
        two = event_message("contentBlockDelta", b'{"delta": {"text": "Hi"}}')
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.amazon.eventstream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        body = one + two
        cut = len(one) + 9  # a chunk ends inside the second message's prelude
        framed = (head + b"%x\r\n" % cut + body[:cut] + b"\r\n"
                  + b"%x\r\n" % (len(body) - cut) + body[cut:] + b"\r\n0\r\n\r\n")
        first_end = framed.index(one) + len(one)
        second_end = framed.index(body[cut:]) + len(body) - cut
        rest = framed[len(head):]  # (the head in the first read, where its type is seen)
        events = self.events(head, *(rest[i:i + 7] for i in range(0, len(rest), 7)))
        assert events == [(first_end, b'event: messageStart\ndata: {"role": "assistant"}'),
                          (second_end, b'event: contentBlockDelta\ndata: {"delta": {"text": '
                                       b'"Hi"}}')]

    def test_a_broken_event_stream_message_ends_the_search(self) -> None:
        """A message whose CRC is wrong, or a stream cut inside one: the events before it
        keep their ends; nothing after it is taken for an event."""
        one = event_message("messageStart", b'{"role": "assistant"}')
        two = bytearray(event_message("contentBlockDelta", b'{"delta": {"text": "Hi"}}'))
        two[-6] ^= 0xFF  # a payload byte: the message's CRC no longer matches
        three = event_message("contentBlockDelta", b'{"delta": {"text": "!"}}')
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.amazon.eventstream\r\n\r\n"
        assert self.ends(head + one + bytes(two) + three) == [len(head) + len(one)]
        assert self.ends(head + one + three[:-7]) == [len(head) + len(one)]

    def test_records_handed_over_one_by_one(self, pair) -> None:
        """Plaintext decrypted from bytes an earlier read took off the socket (3.10's
        asyncio TLS hands each record over in its own call) shares that read's wire bytes:
        the first event does not end where the whole batch does."""
        client, server = pair
        arrivals = Arrivals(client)
        arrivals.classify = lambda event: True
        one, two = event(1), event(2)
        server.sendall(one + two)
        receive(client, len(one + two))  # all of it off the socket at once, as the loop does
        arrivals.read(one, perf_counter())
        arrivals.read(two, perf_counter())
        arrivals.scan()
        start = arrivals.cum[0] - len(one + two)
        assert arrivals.ends == [start + len(one), start + len(one + two)]


class TestEventsAfterTheFirstToken:
    """A first token read with the rest of its stream is dated back by the events read with
    it, counted over the bytes without classifying them one by one."""

    def arrivals(self, classify) -> Arrivals:
        listener = socket.create_server(("127.0.0.1", 0))
        with socket.create_connection(listener.getsockname()) as sock:
            arrivals = Arrivals(sock)
        listener.close()
        arrivals.classify = classify
        arrivals.consumed = 0
        arrivals.tls = False  # wire offsets = the bytes read
        return arrivals

    def stream(self) -> bytes:
        one = b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n'
        ping = b"event: ping\ndata: {}\n\n"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
        return (head + one + b"".join(event(n) for n in range(20)) + ping
                + b"".join(event(n) for n in range(20, 40)) + b"data: [DONE]\n\n")

    def test_the_events_after_it_are_not_classified(self) -> None:
        seen: list[bytes] = []
        arrivals = self.arrivals(lambda e: bool(seen.append(e)) or b'"n"' in e)
        arrivals.read(self.stream(), perf_counter() + 1.0)  # (its window: a second)
        first = arrivals.first_output()
        assert first is not None and len(seen) == 2
        got = arrivals.arrival(first, 0.001)
        assert got is not None and got.source == "estimated"
        assert len(seen) == 2  # counted, not classified
        assert got.t == pytest.approx(arrivals.t[0] - 39 * 0.001, abs=1e-9)

    def test_a_block_read_is_cut_at_a_wire_offset(self) -> None:
        """The bytes of a block (10 read for 20 wire bytes, TLS) at or before an offset:
        in proportion, rounded up; none before the block, all past it."""
        data = b"abcdefghij"
        assert _bytes_through(100, 120, data, 101) == b"a"
        assert _bytes_through(100, 120, data, 110) == b"abcde"
        assert _bytes_through(100, 120, data, 95) == b""
        assert _bytes_through(100, 120, data, 130) == data

    @pytest.mark.parametrize("cuts", [(), (7,), (150, 151), (333, 334, 900), (37, 400, 401, 402)])
    def test_counted_as_a_scan_finds_them(self, cuts) -> None:
        """However the reads cut the stream, the count is what scanning every event finds."""
        data = self.stream()
        dated = []
        for scan_all in (False, True):
            arrivals = self.arrivals(lambda e: b'"n"' in e)
            edges = (0, *cuts, len(data))
            start = perf_counter()
            for k, (a, b) in enumerate(pairwise(edges), 1):
                arrivals.read(data[a:b], start + k)  # a second apart: no window is clamped
            if scan_all:
                arrivals.scan()
            first = arrivals.first_output()
            assert first is not None
            got = arrivals.arrival(first, 0.001)
            assert got is not None
            j = bisect_left(arrivals.cum, first)
            dated.append(round((arrivals.t[j] - got.t) / 0.001))
        assert dated[0] == dated[1], cuts
        if not cuts:
            assert dated[0] == 39


class TestKernelStamps:
    """The receive queue's newest stamp is the sender's time; coalesced ones are dated back."""

    def test_a_first_token_scanned_alone_counts_the_events_after_it(self, pair) -> None:
        """A block whose first event is the first token, scanned no further (the first
        token was all that was asked), is not that token's stamp: it is dated back by the
        events the block holds after it."""
        client, server = pair
        arrivals = Arrivals(client)
        arrivals.classify = lambda event: True
        time.sleep(0.02)  # nothing is dated before the connection's start
        timed_send(server, b"".join(event(n) for n in range(3)))
        time.sleep(0.01)
        arrivals.observe()  # one stamp: the block's newest byte
        arrivals.read(client.recv(4096), perf_counter())
        first = arrivals.first_output()
        assert first is not None and arrivals.ends == [first]  # scanned alone
        got = arrivals.arrival(first, 0.002)
        assert got is not None and got.source == "estimated", (got, arrivals.ends)
        assert got.t == pytest.approx(arrivals.t[0] - 2 * 0.002, abs=1e-9)

    def test_bytes_queued_without_a_stamp_are_seen_at_the_peek(self, pair,
                                                               monkeypatch) -> None:
        """Bytes that landed before the kernel turned stamps on (none kept them on) are
        an observation at the time the peek found them, not none: the watcher, woken once
        for them, would not look again."""
        from agent_latency.instrumentation.net import _arrivals, _kernel

        client, server = pair
        arrivals = Arrivals(client)

        def unstamped(fd: int, family: int) -> tuple[int, float | None] | None:
            got = _kernel.peek_queued(fd, family)
            return None if got is None else (got[0], None)

        monkeypatch.setattr(_arrivals, "peek_queued", unstamped)
        sent = timed_send(server, event(1))
        time.sleep(0.01)
        before = perf_counter()
        assert arrivals.observe() == len(event(1))
        assert arrivals.kind == [1] and arrivals.cum == [arrivals.consumed + len(event(1))]
        assert before <= arrivals.t[0] <= perf_counter() and arrivals.t[0] > sent[1]

    def test_a_segment_landing_during_the_look_is_counted_with_the_stamp(self, pair) -> None:
        """The look before a peek lets the GIL go, and a thread busy in Python keeps it for
        the switch interval: a segment landing then is in the peek, its stamp the newest.
        The count the stamp is filed under is read after the look, so it covers that
        segment (read before it, CI filed the next token's stamp under the first token's
        bytes: a first token 10 ms late at 100 tokens/s)."""
        client, server = pair
        arrivals = Arrivals(client)
        real_looks = arrivals.looks
        assert real_looks is not None
        sends: list[tuple[float, float]] = []

        class SlowLook:
            def poll(self, timeout: float) -> Any:
                if len(sends) == 1:  # the next token lands while the look waits
                    sends.append(timed_send(server, event(2)))
                    time.sleep(0.01)
                return real_looks.poll(timeout)

        arrivals.looks = SlowLook()
        sends.append(timed_send(server, event(1)))
        time.sleep(0.01)
        assert arrivals.observe() == len(event(1)) + len(event(2))
        assert arrivals.cum == [arrivals.consumed + len(event(1)) + len(event(2))]
        assert arrivals.kind == [0] and within(arrivals.t[0], sends[1])

    def test_a_segment_landing_during_the_peek_is_counted_with_the_stamp(self, pair,
                                                                         monkeypatch) -> None:
        """The peek's system call lets the GIL go, and a busy thread may then keep the core
        too: a segment landing between the count and the peek is in the peek, its stamp the
        newest.  The count is read again after the peek, and the stamp filed under the
        bytes it covers (under the first count, CI dated a first token a token late)."""
        from agent_latency.instrumentation.net import _arrivals

        client, server = pair
        real_peek = _arrivals.peek_queued
        sends: list[tuple[float, float]] = []

        def late_peek(fd: int, family: int) -> Any:
            if len(sends) == 1:  # the next token lands between the count and the peek
                sends.append(timed_send(server, event(2)))
                time.sleep(0.01)
            return real_peek(fd, family)

        monkeypatch.setattr(_arrivals, "peek_queued", late_peek)
        arrivals = Arrivals(client)
        arrivals.looks = None
        sends.append(timed_send(server, event(1)))
        time.sleep(0.01)
        assert arrivals.observe() == len(event(1)) + len(event(2))
        assert arrivals.cum == [arrivals.consumed + len(event(1)) + len(event(2))]
        assert arrivals.kind == [0] and within(arrivals.t[0], sends[1])

    def test_segments_landing_at_every_peek_leave_a_bound(self, pair, monkeypatch) -> None:
        """Where segments keep landing between every count and peek, the last peek's stamp
        is a later byte's: the bytes counted before it were there by then, a bound (a read's
        kind), never an arrival measured."""
        from agent_latency.instrumentation.net import _arrivals

        client, server = pair
        real_peek = _arrivals.peek_queued
        sent: list[tuple[float, float]] = []

        def busy_peek(fd: int, family: int) -> Any:
            sent.append(timed_send(server, event(len(sent) + 1)))
            time.sleep(0.005)
            return real_peek(fd, family)

        monkeypatch.setattr(_arrivals, "peek_queued", busy_peek)
        arrivals = Arrivals(client)
        arrivals.looks = None
        timed_send(server, event(0))
        time.sleep(0.005)
        arrivals.observe()
        assert len(sent) == _arrivals._SAME_INSTANT_TRIES
        # (counted before the last peek: all but the segment sent in it)
        last = sum(len(event(n)) for n in range(len(sent)))
        assert arrivals.cum == [arrivals.consumed + last] and arrivals.kind == [1]
        assert within(arrivals.t[0], sent[-1])

    def test_bytes_landing_as_the_connection_is_followed(self, pair, monkeypatch) -> None:
        """What the reader had taken when following began is the received count less the
        queue from one instant: bytes landing between the two reads (a response's head, on
        a loaded machine: CI's 3.10 suite dated a first token at its head, 5.8 ms for
        0.405 s) would shift every plain-HTTP offset back by their length."""
        from agent_latency.instrumentation.net import _arrivals

        client, server = pair
        real_queued = _arrivals._queued
        landed: list[bool] = []

        def late_queue(fd: int) -> int:
            if not landed:  # the head lands between the count and the queue's length
                landed.append(True)
                server.sendall(event(0))
                time.sleep(0.01)
            return real_queued(fd)

        monkeypatch.setattr(_arrivals, "_queued", late_queue)
        arrivals = Arrivals(client)
        monkeypatch.setattr(_arrivals, "_queued", real_queued)
        arrivals.tls = False  # offsets from the reads' lengths, as on a plain connection
        assert arrivals.consumed == 0
        arrivals.observe()  # the head's observation
        time.sleep(0.02)
        sent = timed_send(server, event(1))  # as long as the head: a shift would date it there
        time.sleep(0.01)
        arrivals.observe()
        arrivals.read(client.recv(4096), perf_counter())
        arrivals.scan()
        second = arrivals.arrival(arrivals.ends[1])
        assert second is not None and within(second.t, sent), (second, sent)

    def test_queued_bytes_carry_their_send_time(self, pair) -> None:
        client, server = pair
        arrivals = Arrivals(client)
        sent = timed_send(server, event(1))
        time.sleep(0.01)
        assert arrivals.observe() == len(event(1))
        data = client.recv(4096)
        arrivals.read(data, perf_counter())
        arrivals.scan()
        [end] = arrivals.ends
        got = arrivals.arrival(end)
        assert got is not None and got.source == "measured"
        assert within(got.t, sent)

    def test_coalesced_events_are_dated_from_the_pace(self, pair) -> None:
        client, server = pair
        arrivals = Arrivals(client)
        sends = []
        for n in range(3):
            sends.append(timed_send(server, event(n)))
            time.sleep(0.03)
        arrivals.observe()  # the reader was away: one observation, the newest stamp
        data = client.recv(4096)
        arrivals.read(data, perf_counter())
        arrivals.scan()
        first, _, last = arrivals.ends
        newest = arrivals.arrival(last)
        assert newest is not None and newest.source == "measured"
        assert within(newest.t, sends[2])
        oldest = arrivals.arrival(first, pace=sends[1][0] - sends[0][0])
        assert oldest is not None and oldest.source == "estimated"
        # Within 3 ms of its send, plus how unevenly this process's sleeps spaced the sends
        # (a loaded machine wakes it late: the pace is the first interval, not the second).
        uneven = abs((sends[2][0] - sends[1][0]) - (sends[1][0] - sends[0][0]))
        # And the third send's own length: its stamp may come anywhere within it.
        uneven += sends[2][1] - sends[2][0]
        assert abs(oldest.t - sends[0][0]) < 0.003 + uneven, (oldest, uneven)
        # Without a pace the bound still holds: no earlier than the connection's start.
        unpaced = arrivals.arrival(first)
        assert unpaced is not None and arrivals.t_start <= unpaced.t <= newest.t

    def test_a_guessed_pace_is_bounded_both_ways(self, pair) -> None:
        client, server = pair
        arrivals = Arrivals(client)
        time.sleep(0.1)  # the window opens well before the first event
        sends = []
        for n in range(3):
            sends.append(timed_send(server, event(n)))
            time.sleep(0.03)
        arrivals.observe()
        data = client.recv(4096)
        arrivals.read(data, perf_counter())
        arrivals.scan()
        first = arrivals.ends[0]
        # Another stream's pace, three times too slow: the date lands at the window's start,
        # 0.1 s before the truth.
        guessed = arrivals.arrival(first, pace=0.1, waited=True, pace_seen=False)
        assert guessed is not None and guessed.source == "estimated"
        assert guessed.t < sends[0][0] - 0.05
        # Its bound reaches to the newest stamp: the truth lies within it.
        assert abs(sends[0][0] - guessed.t) <= guessed.bound + CLOCK_SLACK, guessed
        # The same pace seen on the stream itself keeps the bound of the earlier side only.
        seen = arrivals.arrival(first, pace=0.1, waited=True)
        assert seen is not None and seen.bound < guessed.bound

    def test_a_read_time_is_kept_where_nothing_was_queued(self, pair) -> None:
        client, server = pair
        arrivals = Arrivals(client)
        assert arrivals.observe() == 0  # nothing there: the read waits for it
        threading.Timer(0.02, server.sendall, (event(1),)).start()
        data = client.recv(4096)
        t = perf_counter()
        arrivals.read(data, t)
        arrivals.scan()
        got = arrivals.arrival(arrivals.ends[0])
        assert got is not None and got.source == "read" and got.t == t

    def test_empty_queues_are_looked_at_not_read(self, pair, monkeypatch) -> None:
        """With a poll object on the socket, an empty receive or error queue is seen by a
        look: no read that fails (an error built per read, ~16,000 instructions); with
        bytes or stamps waiting, the reads give what they gave without it."""
        from agent_latency.instrumentation.net import _kernel

        client, server = pair
        fd, family = client.fileno(), client.family
        looks = _kernel.poller(fd)
        assert looks is not None
        _kernel.enable_timestamps(client)
        reads = []

        class CountingView:
            def __init__(self, view: Any) -> None:
                self.view = view

            def __getattr__(self, name: str) -> Any:
                if name.startswith("recvmsg"):
                    reads.append(name)
                return getattr(self.view, name)

        original_socket = _kernel._C_SOCKET
        monkeypatch.setattr(_kernel, "_C_SOCKET",
                            lambda *a: CountingView(original_socket(*a)))
        assert not _kernel.has_queued(looks)
        assert _kernel.last_transmitted(fd, family, looks) is None
        assert reads == []
        # Without the look the same answers cost a failing read each.
        assert _kernel.peek_queued(fd, family) is None
        assert _kernel.last_transmitted(fd, family) is None
        assert reads == ["recvmsg_into", "recvmsg"]
        reads.clear()
        sent = timed_send(server, event(1))
        time.sleep(0.01)
        assert _kernel.has_queued(looks)
        got = _kernel.peek_queued(fd, family)
        assert got is not None and got[0] == len(event(1)) and got[1] is not None
        assert within(got[1], sent)
        _kernel.transmit_stamps(client, True)
        stamped = timed_send(client, b"x" * 1000)
        stamp = _kernel.last_transmitted(fd, family, looks)
        _kernel.transmit_stamps(client, False)
        assert stamp is not None and within(stamp[0], stamped)
        # One read for the stamp, none to find the queue empty after it.
        assert reads == ["recvmsg_into", "recvmsg"]

    def test_without_the_interpreter_s_poll_the_queues_are_read(self, pair,
                                                                monkeypatch) -> None:
        """Where ``select.poll`` is not the interpreter's own (gevent's monkey-patched one
        waits on its hub), no poll object is made: the reads find empty queues themselves."""
        from agent_latency.instrumentation.net import _kernel

        monkeypatch.setattr(_kernel, "_C_POLL", None)
        client, server = pair
        assert _kernel.poller(client.fileno()) is None
        arrivals = Arrivals(client)
        assert arrivals.looks is None
        assert arrivals.observe() == 0
        timed_send(server, event(1))
        time.sleep(0.01)
        assert arrivals.observe() == len(event(1))

    def test_the_request_leaves_with_a_transmit_stamp(self, pair) -> None:
        client, _server = pair
        arrivals = Arrivals(client)
        arrivals.sending()
        sent = timed_send(client, b"x" * 100_000)
        arrivals.done_sending()
        # The last segment may leave after the write returned (TCP sends the rest as the
        # first are acknowledged): its stamp lies before the stamps were taken.
        assert arrivals.t_sent is not None
        assert within(arrivals.t_sent, (sent[0], perf_counter())), (arrivals.t_sent, sent)
        # Nothing left in the error queue: the socket does not poll as failed.
        import select

        poller = select.poll()
        poller.register(client.fileno(), select.POLLIN | select.POLLERR)
        assert poller.poll(0) == []


class TestPace:
    """The server's pace is the mean interval of its events, skewed timers and stalls
    aside."""

    def paced(self, pair, intervals: list[float]) -> Arrivals:
        """Arrivals whose events (100 bytes each) were each stamped alone, ``intervals``
        apart."""
        client, _server = pair
        arrivals = Arrivals(client)
        t = 1000.0
        for n in range(len(intervals) + 1):
            arrivals.ends.append(100 * (n + 1))
            arrivals.cum.append(100 * (n + 1))
            arrivals.t.append(t)
            arrivals.kind.append(0)  # KERNEL
            if n < len(intervals):
                t += intervals[n]
        return arrivals

    def test_a_skewed_timer(self, pair) -> None:
        # An event loop's timer for 10 ms: the median interval is 10.4 ms, the mean 10.0.
        arrivals = self.paced(pair, [0.0105, 0.0104, 0.0091] * 20)
        pace = arrivals.pace()
        assert pace is not None and abs(pace - 0.0100) < 0.0002, pace

    def test_a_stall_and_the_closing_burst_are_kept_out(self, pair) -> None:
        intervals = [0.010] * 30
        intervals[12] = 0.200  # the server stalled once
        intervals += [0.0001, 0.0001]  # the finish reason and usage, sent at once
        pace = self.paced(pair, intervals).pace()
        assert pace is not None and abs(pace - 0.010) < 0.0005, pace

    def test_a_late_write_and_its_catch_up(self, pair) -> None:
        pace = self.paced(pair, [0.010, 0.0179, 0.0021, 0.010] * 10).pace()
        assert pace is not None and abs(pace - 0.010) < 0.0005, pace

    def test_fewer_events_than_a_window(self, pair) -> None:
        pace = self.paced(pair, [0.008, 0.012, 0.010]).pace()
        assert pace is not None and abs(pace - 0.010) < 1e-9, pace


class TestWatcher:
    """The watcher thread stamps each arrival while the reader is away."""

    def test_each_arrival_stamped(self, pair) -> None:
        client, server = pair
        arrivals = Arrivals(client)
        WATCHER.watch(arrivals)
        try:
            sends = []
            for n in range(3):
                sends.append(timed_send(server, event(n)))
                assert looked(arrivals, n + 1), arrivals.cum
            data = client.recv(4096)
            arrivals.read(data, perf_counter())
        finally:
            WATCHER.unwatch(arrivals)
        arrivals.scan()
        for end, sent in zip(arrivals.ends, sends, strict=True):
            got = arrivals.arrival(end)
            assert got is not None and got.source == "measured", (got, arrivals.cum)
            assert within(got.t, sent)

    def test_a_reused_descriptor_is_watched(self, pair) -> None:
        """A watched socket closed without being unwatched leaves its number behind; the
        next socket given that number is still watched."""
        listener = socket.create_server(("127.0.0.1", 0))
        old = socket.create_connection(listener.getsockname())
        old_peer, _ = listener.accept()
        stale = Arrivals(old)
        WATCHER.watch(stale)
        fd = old.fileno()
        old.close()  # never unwatched
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        listener.close()
        try:
            if client.fileno() != fd:
                pytest.skip("the descriptor number was not reused")
            arrivals = Arrivals(client)
            WATCHER.watch(arrivals)
            try:
                sent = timed_send(server, event(1))
                looked(arrivals, 1)
            finally:
                WATCHER.unwatch(arrivals)
            assert arrivals.kind[:1] == [0], (arrivals.cum, arrivals.kind)  # KERNEL
            assert within(arrivals.t[0], sent)
        finally:
            client.close()
            server.close()
            old_peer.close()
            WATCHER.unwatch(stale)

    def test_a_collection_that_holds_the_gil(self, pair, tmp_path) -> None:
        """Bytes that land during a garbage collection (nobody can stamp them then) are
        dated back from the newest stamp at the pace the later ones show."""
        client, server = pair
        writer, go_w = gated_writer(server, (
            "for n in range(8):\n"
            "    time.sleep(0.02)\n"
            "    t = time.perf_counter(); s.sendall(b'data: {\"n\": %d}\\n\\n' % n)\n"
            "    print(t, flush=True)\n"))
        heap = _collection_of_at_least(0.1)
        arrivals = Arrivals(client)
        WATCHER.watch(arrivals)
        try:
            os.write(go_w, b"g")
            started = perf_counter()
            gc.collect()
            paused = perf_counter() - started
            out, _ = writer.communicate(timeout=30)
            arrivals.read(receive(client, sum(len(event(n)) for n in range(8))), perf_counter())
        finally:
            WATCHER.unwatch(arrivals)
            os.close(go_w)
            del heap
        arrivals.scan()
        sent = [float(line) for line in out.split()]
        during = [t for t in sent if t < started + paused]
        if len(during) < 2:
            pytest.skip(f"the collection ({paused * 1e3:.0f} ms) was too short to hold two "
                        "arrivals")
        pace = arrivals.pace(arrivals.ends[len(during) - 1])
        first = arrivals.arrival(arrivals.ends[0], pace)
        assert first is not None and first.source == "estimated"
        # Dated back, within two paces of its send (the bound says how far it may be off),
        # plus how far the writer's own sleeps strayed from that pace (a loaded machine
        # wakes it late, and the strays add up over the intervals dated back).
        uneven = (max(abs((t - sent[0]) - j * pace) for j, t in enumerate(sent))
                  if pace is not None else 0.0)
        assert abs(first.t - sent[0]) <= 0.045 + uneven, (first, sent[0], paused, uneven)
        assert first.t - first.bound <= sent[0] + CLOCK_SLACK

    def test_quiet_ticks_bound_a_wait_held_in_c(self, pair) -> None:
        """Bytes that land while C code holds the GIL are dated no earlier than the watcher's
        last quiet tick before it, not back to the start of the wait."""
        client, server = pair
        writer, go_w = gated_writer(server, (
            "time.sleep(0.25)\n"
            "for n in range(4):\n"
            "    t = time.perf_counter(); s.sendall(b'data: {\"n\": %d}\\n\\n' % n)\n"
            "    print(t, flush=True)\n"
            "    time.sleep(0.005)\n"))
        values = [((i * 7919) % 1_000_003) / 7.0 for i in range(3_000_000)]
        arrivals = Arrivals(client)
        arrivals.ticked = True
        WATCHER.watch(arrivals)
        try:
            os.write(go_w, b"g")
            waited_from = perf_counter()
            time.sleep(0.15)  # the GIL free: the watcher ticks, nothing has come
            # A loaded machine may keep the watcher off a core a while: the hold starts
            # once its last quiet tick is recent (the tick is what bounds the wait).
            deadline = perf_counter() + 2.0
            while perf_counter() < deadline and (
                    arrivals._quiet_at is None or perf_counter() - arrivals._quiet_at[0] > 0.02):
                time.sleep(0.002)
            held_from = perf_counter()
            tick = arrivals._quiet_at[0] if arrivals._quiet_at is not None else waited_from
            sorted(values)  # C code that never lets the GIL go
            held_to = perf_counter()
            out, _ = writer.communicate(timeout=30)
            arrivals.read(receive(client, sum(len(event(n)) for n in range(4))), perf_counter())
        finally:
            WATCHER.unwatch(arrivals)
            os.close(go_w)
        arrivals.scan()
        sent = [float(line) for line in out.split()]
        if not (held_from + 0.01 < sent[0] and sent[-1] < held_to):
            pytest.skip(f"the hold ({held_to - held_from:.3f} s) did not cover the sends")
        first = arrivals.arrival(arrivals.ends[0], waited=True)
        assert first is not None and first.source == "estimated", arrivals.cum
        earliest = first.t - first.bound
        # The window opens at the last tick before the hold, not at the wait's start
        # 0.15 s earlier; and it is honest: the bytes came after it.
        assert tick >= waited_from + 0.1, (tick, waited_from)
        assert tick - CLOCK_SLACK <= earliest <= sent[0] + CLOCK_SLACK, (earliest, tick)
        assert earliest <= first.t <= sent[-1] + CLOCK_SLACK



class _Owner:
    """A recogniser's observer that takes arrival times on its exchange, as the LLM layer's
    does, and keeps nothing else."""

    def __init__(self) -> None:
        self.following: Any = None
        self.ended = threading.Event()

    def add_attempt(self, attempt: Any) -> None:
        self.following = follow(attempt, lambda line: b'"content": "h' in line)
        self.following.watch(ticks=True)

    def header_lines(self) -> bytes:
        return b""

    def request_body(self, body: bytes | None) -> None:
        pass

    def response_head(self, status: int, headers: dict[str, str], t: float) -> None:
        pass

    def response_data(self, data: bytes, t: float) -> None:
        pass

    def response_end(self, t: float, error: BaseException | None) -> None:
        self.ended.set()


class TestRecognisedExchange:
    """A request the wire layer recognised has its reads dated from the kernel: an NDJSON
    stream's first output line, landing while the reader is busy with the line before it."""

    def test_a_busy_reader_gets_the_lines_arrival(self, pair) -> None:
        client, server = pair
        owner = _Owner()
        exchanges_patch.acquire()
        recognise_with(lambda request: owner, lambda path: path == "/api/chat")
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        opening, output, done = (b'{"message": {"content": ""}}\n',
                                 b'{"message": {"content": "hi"}}\n', b'{"done": true}\n')

        def chunk(line: bytes) -> bytes:
            return b"%x\r\n" % len(line) + line + b"\r\n"

        writer, go_w = gated_writer(server, (
            f"s.sendall({head + chunk(opening)!r})\n"
            "time.sleep(0.06)\n"
            f"t = time.perf_counter(); s.sendall({chunk(output)!r}); print(t, flush=True)\n"
            "print(time.perf_counter(), flush=True)\n"
            "time.sleep(0.2)\n"
            f"s.sendall({chunk(done) + b'0' + bytes([13, 10, 13, 10])!r})\n"))
        try:
            client.sendall(b"POST /api/chat HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
            assert owner.following is not None, "the request was not recognised and tapped"
            receive(server, 2)
            os.write(go_w, b"g")
            data = client.recv(65536)
            while opening not in data:
                data += client.recv(65536)
            busy_until = perf_counter() + 0.15  # the first line's parse, made slow
            while perf_counter() < busy_until:
                pass
            while not owner.ended.is_set():
                client.recv(65536)
            out, _ = writer.communicate(timeout=30)
        finally:
            recognise_with(None)
            exchanges_patch.release()
            os.close(go_w)
            if owner.following is not None:
                owner.following.stop()
        sent = tuple(float(line) for line in out.split())
        arrivals = owner.following.arrivals
        offset = arrivals.first_output()
        assert offset is not None, "the NDJSON output line was not found"
        arrival = arrivals.arrival(offset, waited=True)
        assert arrival is not None, "no observation covers the output line"
        if arrival.source == ESTIMATED:
            pytest.skip("the watcher was kept off the CPU until the next line came (load)")
        assert arrival.source == MEASURED, arrival
        assert within(arrival.t, sent), (arrival, sent, busy_until)
