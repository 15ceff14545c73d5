"""One request's life on the simulated server: queue, prefill, timed output, truth.

API modules (chat, responses, messages, gemini) build a :class:`Generation`, call
:meth:`admit`, then either :meth:`stream` (passing a writer that encodes chunks in their
API's format) or :meth:`generate_silently` for non-streaming responses, and finally
:meth:`finish`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import TYPE_CHECKING

from ._faults import Fault
from ._script import Plan, Segment
from ._timing import token_deadlines
from ._truth import TruthRecord

if TYPE_CHECKING:
    from ._state import ServerState

# (segment index, segment, text of this chunk, first chunk of the segment?) -> bytes written
ChunkWriter = Callable[[int, Segment, str, bool], Awaitable[None]]


class StreamCut(Exception):
    """Raised by :meth:`Generation.stream` when a ``cut`` fault ends the stream."""


class Generation:
    """Timing and truth of one request; encoders only format and write."""

    __slots__ = ("_dues", "_seat", "fault", "input_tokens", "plan", "record", "state")

    def __init__(self, state: ServerState, record: TruthRecord, plan: Plan,
                 input_tokens: int, fault: Fault | None) -> None:
        self.state = state
        self.record = record
        self.plan = plan
        self.input_tokens = input_tokens
        self.fault = fault
        self._seat = False
        self._dues: list[float] = []
        record.input_tokens = input_tokens
        record.output_tokens = plan.output_tokens
        record.prefill_tps = plan.prefill_tps
        record.output_tps = plan.output_tps
        record.tokens_per_chunk = plan.tokens_per_chunk
        record.finish_reason = plan.finish
        record.fault = fault.kind if fault else None

    async def delay_headers(self) -> None:
        """A ``slow_headers`` fault: wait before anything is sent (not counted as queue)."""
        if self.fault is not None and self.fault.kind == "slow_headers":
            t0 = perf_counter()
            await self.state.clock.sleep(self.fault.delay_ms / 1000.0)
            self.record.fault_delay_s = perf_counter() - t0

    async def admit(self) -> None:
        """Queue, wait for a batch seat and the prefill slot, then prefill."""
        clock = self.state.clock
        rec = self.record
        # From the body received: writing a stream's headers and opening events before
        # admission is server time a client can only see as waiting (on a busy machine,
        # milliseconds).
        queue_start = (rec.started_at_mono or perf_counter()) + (rec.fault_delay_s or 0.0)
        if self.state.gate is not None:
            await self.state.gate.wait()
        if self.plan.queue_ms > 0:
            await clock.sleep(self.plan.queue_ms / 1000.0)
        await self.state.capacity.acquire_seat()
        self._seat = True
        async with self.state.capacity.prefill_slot:
            rec.mark("prefill_started_at")
            start = rec.prefill_started_at_mono
            rec.queue_s = start - queue_start
            # computed before the prefill sleep so the first token is not late by this work
            self._dues = self._deadlines()
            await clock.sleep_until(start + self.input_tokens / self.plan.prefill_tps)
            rec.prefill_s = perf_counter() - start

    def _deadlines(self) -> list[float]:
        rng = random.Random(f"{self.state.config.seed}:{rec_id(self.record)}")
        start = self.record.prefill_started_at_mono + self.input_tokens / self.plan.prefill_tps
        return list(token_deadlines(start, self.plan.output_tokens, self.plan.output_tps,
                                    self.plan.jitter, rng))

    async def stream(self, write: ChunkWriter,
                     on_malformed: Callable[[], Awaitable[None]] | None = None, *,
                     whole_tool_calls: bool = False) -> None:
        """Write every chunk at its deadline; raises :class:`StreamCut` on a cut fault.

        With ``whole_tool_calls`` a tool call is one chunk, due with its last token.
        """
        dues = self._dues
        clock = self.state.clock
        rec = self.record
        per = self.plan.tokens_per_chunk
        fault = self.fault
        trip = -1
        if fault is not None and fault.kind in ("cut", "malformed"):
            trip = fault.after if fault.after is not None else self.plan.output_tokens // 2
        done = chunks = 0
        for index, seg in enumerate(self.plan.segments):
            tokens = seg.tokens
            step = max(len(tokens), 1) if whole_tool_calls and seg.kind == "tool" else per
            for i in range(0, len(tokens), step):
                piece = tokens[i : i + step]
                if done <= trip < done + len(piece):
                    if fault.kind == "cut":  # type: ignore[union-attr]  # trip >= 0 only with a fault
                        rec.output_tokens = done
                        raise StreamCut
                    if on_malformed is not None:
                        await on_malformed()
                    trip = -1
                await clock.sleep_until(dues[done + len(piece) - 1])
                writing = perf_counter()
                await write(index, seg, "".join(piece), i == 0)
                mono = perf_counter()
                wall = time.time()
                if chunks == 0:
                    rec.first_token_at, rec.first_token_at_mono = wall, mono
                    rec.first_token_write_mono = writing
                rec.last_token_at, rec.last_token_at_mono = wall, mono
                rec.last_token_write_mono = writing
                chunks += 1
                done += len(piece)
        rec.chunks = chunks
        self._close_generation()

    async def generate_silently(self) -> None:
        """Non-streaming: wait until the last token would have been generated."""
        dues = self._dues
        rec = self.record
        if dues:
            rec.first_token_at_mono = dues[0]
            rec.first_token_at = time.time() - (perf_counter() - dues[0])
            await self.state.clock.sleep_until(dues[-1])
            rec.mark("last_token_at")
        rec.chunks = 0
        self._close_generation()

    def _close_generation(self) -> None:
        rec = self.record
        if rec.first_token_at_mono is not None and rec.last_token_at_mono is not None:
            rec.output_generation_s = rec.last_token_at_mono - rec.first_token_at_mono
        else:
            rec.output_generation_s = 0.0
        self.release()

    def release(self) -> None:
        """Give the batch seat back (idempotent)."""
        if self._seat:
            self._seat = False
            self.state.capacity.release_seat()

    def finish(self, status: int = 200) -> None:
        """Release capacity and log the truth record (call exactly once, in ``finally``)."""
        self.release()
        rec = self.record
        rec.status = status if rec.status is None else rec.status
        rec.mark("finished_at")
        self.state.truth.add(rec)


def rec_id(record: TruthRecord) -> str:
    """The record's request id ('' when unset)."""
    return record.request_id or ""

