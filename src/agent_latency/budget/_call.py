"""The phases of one LLM call, derived from its client-side marks."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from ._interval import Interval

#: Where each phase's figure came from.
MEASURED = "measured"
SERVER_REPORTED = "server-reported"
ESTIMATED = "estimated"
#: A non-streamed call's server time that nothing could split (no learned rates, no server
#: timing): all of it is in ``prefill``, and no speed is derived from it.
NOT_SPLIT = "not-split"

#: The phases of a call in the order they follow each other in time.
PHASE_ORDER = (
    "retry", "client", "dns", "connect", "tls", "upload", "rtt", "prefill",
    "output_generation", "tail", "client_tail",
)
# The phase durations in PHASE_ORDER as a tuple, in one C call (a call's hot path reads them
# all).
_phase_values = attrgetter(*PHASE_ORDER)


@dataclass(slots=True)
class CallMarks:
    """Client-side monotonic timestamps of one model request, in seconds.

    ``t_first``/``t_last`` are ``None`` for a non-streaming call.  ``dns``, ``connect`` and
    ``tls`` are durations reported by the HTTP stack for a new connection (0 when pooled);
    ``retry`` is the time spent in failed attempts and back-off before the final attempt
    (it lies between ``t_call`` and ``t_send``).  ``t_received`` is when the response's last
    byte arrived, when the HTTP stack says: what the client does after it (an SDK parsing
    the final event) is its own time, not the network's.  ``first_token_cpu`` is the
    client's CPU time spent after the first token's bytes arrived and before the program saw
    it (a library's first-call imports, parsing): client work, not prefill.
    """

    t_call: float
    t_send: float
    t_sent: float
    t_end: float
    t_first: float | None = None
    t_last: float | None = None
    dns: float = 0.0
    connect: float = 0.0
    tls: float = 0.0
    rtt: float = 0.0
    retry: float = 0.0
    t_received: float | None = None
    first_token_cpu: float = 0.0


@dataclass(slots=True)
class CallPhases:
    """Durations of one call's phases in seconds; they add up to ``t_end - t_call``."""

    retry: float = 0.0
    client: float = 0.0
    dns: float = 0.0
    connect: float = 0.0
    tls: float = 0.0
    upload: float = 0.0
    rtt: float = 0.0
    prefill: float = 0.0
    output_generation: float = 0.0
    tail: float = 0.0
    client_tail: float = 0.0
    ttft: float | None = None
    source: str = MEASURED
    notes: list[str] = field(default_factory=list)

    @property
    def network(self) -> float:
        """All network overhead of the call: setup, upload, one round trip and the tail."""
        return self.dns + self.connect + self.tls + self.upload + self.rtt + self.tail

    @property
    def total(self) -> float:
        """The sum of all phases: the call's duration."""
        return sum(_phase_values(self))

    def items(self) -> list[tuple[str, float]]:
        """``(phase, seconds)`` pairs in time order."""
        return list(zip(PHASE_ORDER, _phase_values(self), strict=True))

    def intervals(
        self, start_ns: int, end_ns: int, call: int = 0, *, input_tokens: int = 0,
        output_tokens: int = 0, name: str = "",
    ) -> list[Interval]:
        """Lay the phases end to end from ``start_ns``; the last one ends at ``end_ns``.

        Rounding to nanoseconds is absorbed by the last non-empty phase, so the intervals
        tile ``[start_ns, end_ns]`` exactly.
        """
        return phases_to_intervals(
            self.items(), start_ns, end_ns, call,
            input_tokens=input_tokens, output_tokens=output_tokens, name=name,
        )


def phases_to_intervals(
    phases: list[tuple[str, float]], start_ns: int, end_ns: int, call: int = 0, *,
    input_tokens: int = 0, output_tokens: int = 0, name: str = "",
) -> list[Interval]:
    """Tile ``[start_ns, end_ns]`` with ``(phase, seconds)`` laid end to end, in order."""
    out: list[Interval] = []
    cursor = start_ns
    for phase, seconds in phases:
        if seconds <= 0:
            continue
        end = min(end_ns, cursor + round(seconds * 1e9))
        tokens = output_tokens if phase == "output_generation" else (
            input_tokens if phase == "prefill" else 0)
        out.append(Interval(cursor, end, phase, call, tokens, name))
        cursor = end
    if out and cursor < end_ns:
        last = out[-1]
        out[-1] = last._replace(end=end_ns)
    elif not out and end_ns > start_ns:
        out.append(Interval(start_ns, end_ns, "client", call, 0, name))
    return out


def call_phases(marks: CallMarks) -> CallPhases:
    """Split one call into phases exactly as docs/budget.md defines them.

    Marks out of order (a clock that went backwards, a first token before the request was
    sent) are clamped so every phase is >= 0 and the phases still sum to ``t_end - t_call``;
    each clamp is named in ``notes``.
    """
    notes: list[str] = []
    t_call = marks.t_call
    t_end = max(marks.t_end, t_call)
    if marks.t_end < t_call:
        notes.append("t_end before t_call")

    def clamp(value: float, lo: float, hi: float, what: str) -> float:
        if value < lo:
            notes.append(f"{what} before its predecessor")
            return lo
        if value > hi:
            notes.append(f"{what} after t_end")
            return hi
        return value

    retry = min(max(marks.retry, 0.0), t_end - t_call)
    # t_call + (t_end - t_call) can round past t_end: the send never starts after the end.
    t_send = clamp(marks.t_send, min(t_call + retry, t_end), t_end, "t_send")
    t_sent = clamp(marks.t_sent, t_send, t_end, "t_sent")
    setup_budget = max(t_send - t_call - retry, 0.0)
    dns, connect, tls = (max(marks.dns, 0.0), max(marks.connect, 0.0), max(marks.tls, 0.0))
    setup = dns + connect + tls
    if setup > setup_budget and setup > 0:
        # The HTTP stack's own durations cannot exceed the time before the first byte.
        scale = setup_budget / setup
        dns, connect, tls = dns * scale, connect * scale, tls * scale
        notes.append("connection setup longer than time before send")
    client = max(setup_budget - dns - connect - tls, 0.0)
    upload = t_sent - t_send
    phases = CallPhases(retry=retry, client=client, dns=dns, connect=connect, tls=tls,
                        upload=upload, notes=notes)
    if marks.t_first is None:
        # No first token: the server time is one block, up to the last byte; the caller
        # splits it (estimated).
        t_block_end = t_end
        if marks.t_received is not None:
            t_block_end = clamp(marks.t_received, t_sent, t_end, "t_received")
        rtt = min(max(marks.rtt, 0.0), t_block_end - t_sent)
        phases.rtt = rtt
        phases.prefill = t_block_end - t_sent - rtt
        phases.client_tail = t_end - t_block_end
        phases.source = MEASURED
        return phases
    t_first = clamp(marks.t_first, t_sent, t_end, "t_first")
    t_last = clamp(marks.t_last if marks.t_last is not None else t_first, t_first, t_end,
                   "t_last")
    rtt = min(max(marks.rtt, 0.0), t_first - t_sent)
    phases.rtt = rtt
    prefill = t_first - t_sent - rtt
    # The client's own CPU before it handed the first token over is client work.
    client_cpu = min(max(marks.first_token_cpu, 0.0), prefill)
    phases.client += client_cpu
    phases.prefill = prefill - client_cpu
    phases.output_generation = t_last - t_first
    # The wire tail ends with the last byte (never before the last token was seen).
    t_wire_end = t_end
    if marks.t_received is not None:
        t_wire_end = min(max(marks.t_received, t_last), t_end)
    phases.tail = t_wire_end - t_last
    phases.client_tail = t_end - t_wire_end
    phases.ttft = t_first - t_call
    return phases


def split_server_time(
    phases: CallPhases, *, input_tokens: int, output_tokens: int,
    prefill_tps: float | None = None, output_tps: float | None = None,
    server_prefill: float | None = None, server_generation: float | None = None,
) -> CallPhases:
    """Split a non-streaming call's server block (held in ``prefill``) into two phases.

    Server-reported durations win; otherwise the block is divided in proportion to the
    times the learned rates predict for this call's tokens (``ESTIMATED``).  With neither,
    the block stays in prefill, ``NOT_SPLIT``.  The two parts always add up to the block, so
    the call's total is unchanged.
    """
    block = phases.prefill + phases.output_generation
    if server_prefill is not None or server_generation is not None:
        if server_generation is None:
            server_generation = max(block - (server_prefill or 0.0), 0.0)
        generation = min(max(server_generation, 0.0), block)
        phases.output_generation = generation
        phases.prefill = block - generation
        phases.source = SERVER_REPORTED
        return phases
    if prefill_tps and output_tps and (input_tokens or output_tokens):
        predicted_prefill = input_tokens / prefill_tps
        predicted_output = output_tokens / output_tps
        predicted = predicted_prefill + predicted_output
        if predicted > 0:
            generation = block * predicted_output / predicted
            phases.output_generation = generation
            phases.prefill = block - generation
            phases.source = ESTIMATED
        else:
            phases.source = NOT_SPLIT
    elif output_tps and output_tokens:
        # Only the output rate is known (streams without input usage): generation is what
        # that rate predicts, at most the whole block; the rest is prefill.
        generation = min(block, output_tokens / output_tps)
        phases.output_generation = generation
        phases.prefill = block - generation
        phases.source = ESTIMATED
    elif prefill_tps and input_tokens:
        prefill = min(block, input_tokens / prefill_tps)
        phases.prefill = prefill
        phases.output_generation = block - prefill
        phases.source = ESTIMATED
    else:
        phases.source = NOT_SPLIT
    return phases
