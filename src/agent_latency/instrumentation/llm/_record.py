"""The end of one LLM call: phases from its marks, span attributes, child spans, metrics."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, Protocol

from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from ... import semconv
from ..._log import FAULTS, fault, internal_error
from ..._scope import error_description
from ..._sdk import emit_finished_children, frozen_attributes, set_plain_attributes
from ...budget import CallMarks, CallPhases, call_phases, split_server_time
from ...codec import phase_attributes, phase_span_tiles_of
from ..net import RTT_NONE, Arrival, Attempt, NetPhases
from . import _rates
from ._info import Info
from ._instruments import Instruments


class _Endpoint(Protocol):
    @property
    def operation(self) -> str: ...

    @property
    def from_response(self) -> Callable[[Any, Any], None] | None: ...

    @property
    def from_stream(self) -> Callable[[Any], None] | None: ...

    @property
    def server_timing(self) -> Callable[[Any, Mapping[str, str]], None] | None: ...

    @property
    def input_messages(self) -> Callable[[Mapping[str, Any]], list[dict[str, Any]]] | None: ...


class _Settings(Protocol):
    @property
    def phase_spans(self) -> bool: ...

    def instruments(self) -> Instruments: ...


class FinishedCall(Protocol):
    """What recording reads of a finished call (``_call.LLMCall``, which calls
    :func:`record` as it finishes: the call is written against this view, not imported)."""

    @property
    def endpoint(self) -> _Endpoint: ...

    @property
    def settings(self) -> _Settings: ...

    info: Info
    span: Span
    tracer: Tracer
    context: Context
    provider: str
    model: str
    kwargs: Mapping[str, Any]
    capture: bool
    content: list[str] | None
    server_address: str | None
    server_port: int | None
    attempts: list[Attempt]
    net: NetPhases
    chunks: int
    outputs: int
    streaming: bool
    start_ns: int
    t_call: float
    t_first: float | None
    t_last: float | None
    t_first_chunk: float | None
    first_cpu: float
    cpu_first: float | None
    first_arrival: Arrival | None
    last_arrival: Arrival | None
    end_arrival: Arrival | None


# -- phases ---------------------------------------------------------------------------
def compute_phases(call: FinishedCall, t_end: float) -> tuple[CallPhases, float, str, bool]:
    """``(phases, rtt, rtt source, connection reused)`` of a finished call."""
    attempts = call.attempts
    t_call = call.t_call
    t_received: float | None
    if attempts:
        final = attempts[-1]
        retry = final.t_start - attempts[0].t_start
        t_send = final.t_send if final.t_send is not None else final.t_start
        t_sent = final.t_sent if final.t_sent is not None else t_send
        dns, connect, tls = final.dns, final.connect, final.tls
        rtt, rtt_source, reused = final.rtt, final.rtt_source, final.reused
        if call.end_arrival is not None:
            t_received = call.end_arrival.t  # the last byte, dated from the wire
        elif call.t_first is not None:
            # A stream's last bytes, from the kernel when the response closed: httpcore's
            # "body complete" fires only when the SDK asks past its final event, after
            # parsing it (0.4 s for a Responses ``response.completed``).  Unknown (no
            # socket, not Linux, not closed yet): the whole tail stays network.
            t_received = final.t_received
        elif call.streaming and final.t_body_done is None:
            # A stream left before its first output token (``break`` on a role-only chunk):
            # the server was still working on that token when the program stopped reading,
            # so its time runs to the end (prefill), not to the response's head.
            t_received = None
        else:
            # A body read to its end (inside ``send`` when not streamed).
            t_received = final.t_body_done or final.t_return
    else:
        retry, t_send, t_sent, dns, connect, tls = 0.0, t_call, t_call, 0.0, 0.0, 0.0
        rtt, rtt_source, reused = 0.0, RTT_NONE, True
        t_received = None
    t_first, t_last = token_marks(call)
    marks = CallMarks(t_call=t_call, t_send=t_send, t_sent=t_sent, t_end=t_end,
                      t_first=t_first, t_last=t_last, dns=dns, connect=connect, tls=tls,
                      rtt=rtt, retry=retry, t_received=t_received,
                      first_token_cpu=0.0 if call.first_arrival is not None
                      else _first_token_cpu(call))
    return call_phases(marks), rtt, rtt_source, reused


def token_marks(call: FinishedCall) -> tuple[float | None, float | None]:
    """The first and last output tokens' marks: when their bytes arrived where the wire was
    watched, else when the SDK handed them over."""
    t_first, t_last = call.t_first, call.t_last
    if t_first is None:
        return None, None
    first, last = call.first_arrival, call.last_arrival
    if first is not None:
        t_first = min(first.t, t_first)
    if last is not None and t_last is not None:
        t_last = min(last.t, t_last)
    if t_last is not None and t_last < t_first:
        t_last = t_first
    return t_first, t_last


def _split(call: FinishedCall, phases: CallPhases) -> None:
    info = call.info
    model = info.response_model or call.model
    if info.server_prefill is not None or info.server_generation is not None:
        split_server_time(phases, input_tokens=info.input_tokens or 0,
                          output_tokens=info.output_tokens or 0,
                          server_prefill=info.server_prefill,
                          server_generation=info.server_generation)
        return
    prefill_tps, output_tps = _rates.rates(call.provider, model)
    # Split by the learned rates (``estimated``), or, without them, left whole in prefill
    # (``not-split``): either way not measured, and no speed is derived from it.
    split_server_time(phases, input_tokens=info.input_tokens or 0,
                      output_tokens=info.output_tokens or 0,
                      prefill_tps=prefill_tps, output_tps=output_tps)


# -- the end ------------------------------------------------------------------------------
def record(call: FinishedCall, t_end: float, error: BaseException | None, response: Any) -> None:
    endpoint = call.endpoint
    info = call.info
    span = call.span
    try:
        if FAULTS:
            fault("llm.extract")
        if response is not None and endpoint.from_response is not None:
            endpoint.from_response(call, response)
        elif call.chunks and endpoint.from_stream is not None:
            endpoint.from_stream(call)
        if call.attempts and endpoint.server_timing is not None:
            resp = call.attempts[-1].response
            if resp is not None:
                endpoint.server_timing(call, resp.headers)
    except Exception:  # noqa: BLE001 - odd shapes must not lose the span
        internal_error("llm.extract")
    t_end = max(t_end, call.t_call)
    if error is not None and not call.attempts and call.net.t_first is None:
        _never_sent(call, t_end, error)
        return
    phases, _rtt, rtt_source, reused = compute_phases(call, t_end)
    measured_stream = call.t_first is not None
    # A stream that ended before its first output token is measured too: its server time
    # was all spent before that token (prefill); only a response that never streamed is
    # one block to split.
    if (not measured_stream and not call.streaming
            and endpoint.operation == semconv.OPERATION_CHAT and error is None):
        _split(call, phases)
    elif measured_stream and error is None:
        # Without a usage chunk (OpenAI streams without ``include_usage``) the output chunks
        # stand in for output tokens: about one token each, good enough to split a later
        # non-streaming call's server block, which is marked estimated anyway.
        _rates.observe(call.provider, info.response_model or call.model,
                       input_tokens=info.input_tokens or 0,
                       output_tokens=info.output_tokens or call.outputs,
                       prefill=phases.prefill, output_generation=phases.output_generation)
    duration = t_end - call.t_call
    end_ns = call.start_ns + round(duration * 1e9)
    attrs: dict[str, Any] = phase_attributes(phases)
    sequences: dict[str, tuple[str, ...]] = {}  # (apart: see set_plain_attributes)
    attrs[semconv.LLM_NETWORK] = phases.network
    attrs[semconv.LLM_RTT_SOURCE] = rtt_source
    attrs[semconv.LLM_TIMING_SOURCE] = phases.source
    attrs[semconv.LLM_ATTEMPTS] = max(len(call.attempts), 1)
    attrs[semconv.LLM_CONNECTION_REUSED] = reused
    attrs[semconv.LLM_CHUNKS] = call.chunks
    if call.t_first is not None:
        first = call.first_arrival
        attrs[semconv.LLM_TTFT] = (phases.ttft if phases.ttft is not None
                                   else call.t_first - call.t_call)
        _arrival_attributes(attrs, first, semconv.LLM_FIRST_TOKEN_SOURCE,
                            semconv.LLM_FIRST_TOKEN_BOUND)
        _arrival_attributes(attrs, call.last_arrival, semconv.LLM_LAST_TOKEN_SOURCE,
                            semconv.LLM_LAST_TOKEN_BOUND)
        if first is not None:
            attrs[semconv.LLM_CLIENT_LAG] = max(call.t_first - first.t, 0.0)
        last = call.last_arrival
        attrs[semconv.LLM_LAST_TOKEN_LAG] = (
            max(call.t_last - last.t, 0.0)
            if last is not None and call.t_last is not None else 0.0)
        busy = _client_busy(call)
        if busy is not None:
            attrs[semconv.LLM_CLIENT_BUSY] = busy
    if call.t_first_chunk is not None:
        attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = call.t_first_chunk - call.t_call
    if call.attempts:
        final = call.attempts[-1]
        if final.request_id:
            attrs[semconv.LLM_SERVER_REQUEST_ID] = final.request_id
        if reused:
            # The handshakes a new connection would have cost: TCP, and TLS when encrypted.
            attrs[semconv.LLM_ROUND_TRIPS_AVOIDED] = 2 if final.secure else 1
        if final.bytes_sent is not None:
            attrs[semconv.LLM_BYTES_SENT] = final.bytes_sent
            attrs[semconv.LLM_BYTES_RECEIVED] = final.bytes_received
        failed = [type(a.error).__qualname__ if a.error is not None else str(a.status)
                  for a in call.attempts[:-1]]
        if failed:
            sequences[semconv.LLM_RETRY_ERRORS] = tuple(failed)
            _attempt_events(call)
    if info.server_queue is not None:
        attrs[semconv.LLM_QUEUE] = info.server_queue
    _server_attributes(info, attrs)
    _info_attributes(info, attrs, sequences)
    out_tokens = info.output_tokens
    # Speeds only from a split that was measured or reported: one from an estimate would
    # give back the rates it was made with, one from a block left whole is no speed.
    derived = phases.source in (semconv.SOURCE_MEASURED, semconv.SOURCE_SERVER_REPORTED)
    if derived and out_tokens and phases.output_generation > 0:
        generated = out_tokens - 1 if measured_stream else out_tokens
        if generated > 0:
            attrs[semconv.LLM_OUTPUT_TOKENS_PER_SECOND] = generated / phases.output_generation
    if derived and info.input_tokens and phases.prefill > 0:
        attrs[semconv.LLM_PREFILL_TOKENS_PER_SECOND] = info.input_tokens / phases.prefill
    per_chunk = None
    if measured_stream and call.outputs > 1:
        per_chunk = phases.output_generation / (call.outputs - 1)
        attrs[semconv.LLM_TIME_PER_OUTPUT_CHUNK] = per_chunk
    if call.capture:
        _content_attributes(call, attrs)
    if error is not None:
        attrs[semconv.ERROR_TYPE] = type(error).__qualname__
        _error_status(call, error)
    set_plain_attributes(span, attrs, sequences)
    if call.settings.phase_spans:
        _phase_spans(call, phases, end_ns)
    span.end(end_time=end_ns)
    _metrics(call, duration, phases, attrs, error, per_chunk)


def _never_sent(call: FinishedCall, t_end: float, error: BaseException) -> None:
    """The SDK raised before any HTTP attempt reached the network (it refused the request,
    say anthropic's "Streaming is required"): not an LLM call.  The span stays, as the
    failed operation, with no phases and no attempts, so no count and no budget component
    but the client's (other) includes it, and no metric records it."""
    _error_status(call, error)
    call.span.set_attributes({semconv.LLM_ATTEMPTS: 0, semconv.ERROR_TYPE:
                              type(error).__qualname__})
    call.span.end(end_time=call.start_ns + round((t_end - call.t_call) * 1e9))


def _error_status(call: FinishedCall, error: BaseException) -> None:
    span = call.span
    # An SDK's message can hold prompt text or the URL with its credentials: only with
    # content capture on (the type, error.type, always).
    span.set_status(Status(StatusCode.ERROR, error_description(error, call.capture)))
    if not isinstance(error, GeneratorExit):
        if call.capture:
            span.record_exception(error)
        else:
            span.add_event("exception", {"exception.type": type(error).__qualname__})


def _arrival_attributes(attrs: dict[str, Any], arrival: Any, source: str, bound: str) -> None:
    if arrival is None:
        attrs[source] = semconv.ARRIVAL_HANDED_OVER
        return
    attrs[source] = arrival.source
    attrs[bound] = arrival.bound


def _first_token_cpu(call: FinishedCall) -> float:
    # CPU of the fetch that produced the first token, but none spent before the request was
    # sent (a stream that sends on its first fetch): prefill starts at the last byte sent.
    busy = _client_busy(call)
    return call.first_cpu if busy is None else min(call.first_cpu, busy)


def _client_busy(call: FinishedCall) -> float | None:
    """The sending thread's CPU time from the last request byte to the first token (sync
    streams): when it is a large part of that wait, the client was busy as the token arrived
    and the prefill seen is an upper bound."""
    if call.cpu_first is None or not call.attempts:
        return None
    sent = call.attempts[-1].cpu_sent
    return max(call.cpu_first - sent, 0.0) if sent is not None else None


def _attempt_events(call: FinishedCall) -> None:
    """A span event per failed attempt, at its start, with its own phases (retries only)."""
    for attempt in call.attempts[:-1]:
        end = attempt.t_return or attempt.t_closed or attempt.t_start
        event: dict[str, Any] = {
            semconv.LLM_ATTEMPT_DURATION: end - attempt.t_start,
            semconv.LLM_CONNECT: attempt.connect, semconv.LLM_TLS: attempt.tls,
            semconv.LLM_CONNECTION_REUSED: attempt.reused,
        }
        if attempt.t_send is not None and attempt.t_sent is not None:
            event[semconv.LLM_UPLOAD] = attempt.t_sent - attempt.t_send
        if attempt.status:
            event[semconv.HTTP_RESPONSE_STATUS_CODE] = attempt.status
        if attempt.error is not None:
            event[semconv.ERROR_TYPE] = type(attempt.error).__qualname__
        offset = attempt.t_start - call.t_call
        call.span.add_event(semconv.LLM_ATTEMPT_EVENT, event,
                            timestamp=call.start_ns + round(offset * 1e9))


# What a response said of itself, read off its Info in one C call each, beside the attribute
# each value goes to (a loop over pairs built per call cost more than the values).
_SERVER_TIMES = attrgetter("server_prefill", "server_generation", "server_load",
                           "server_total", "server_queue")
_SERVER_TIME_ATTRS = (semconv.LLM_SERVER_PREFILL, semconv.LLM_SERVER_OUTPUT_GENERATION,
                      semconv.LLM_SERVER_LOAD, semconv.LLM_SERVER_TOTAL)
_TOKENS = attrgetter("input_tokens", "output_tokens", "cache_read", "cache_creation",
                     "reasoning_tokens")
_TOKEN_ATTRS = (semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
                semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
                semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
                semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS)


def _server_attributes(info: Any, attrs: dict[str, Any]) -> None:
    """The server's own timings, beside the measured phases and labelled as reported."""
    times = _SERVER_TIMES(info)
    if times.count(None) == len(times):
        return
    for value, attr in zip(times, _SERVER_TIME_ATTRS, strict=False):  # (the queue: no attr)
        if value is not None:
            attrs[attr] = value
    attrs[semconv.LLM_SERVER_TIMING_SOURCE] = semconv.SOURCE_SERVER_REPORTED


def _info_attributes(info: Any, attrs: dict[str, Any],
                     sequences: dict[str, tuple[str, ...]]) -> None:
    if info.response_model:
        attrs[semconv.GEN_AI_RESPONSE_MODEL] = info.response_model
    if info.response_id:
        attrs[semconv.GEN_AI_RESPONSE_ID] = info.response_id
    if info.finish_reasons:
        sequences[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(info.finish_reasons)
    for value, attr in zip(_TOKENS(info), _TOKEN_ATTRS, strict=True):
        if value is not None:
            attrs[attr] = int(value)


def _content_attributes(call: FinishedCall, attrs: dict[str, Any]) -> None:
    endpoint = call.endpoint
    try:
        if FAULTS:
            fault("llm.content")
        if endpoint.input_messages is not None:
            attrs[semconv.GEN_AI_INPUT_MESSAGES] = json.dumps(
                endpoint.input_messages(call.kwargs), default=str)
        output = call.info.output_text
        if output is None and call.content:
            output = "".join(call.content)
        if output is not None:
            attrs[semconv.GEN_AI_OUTPUT_MESSAGES] = json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": output}],
                  "finish_reason": (call.info.finish_reasons[0]
                                    if call.info.finish_reasons else None)}], default=str)
    except Exception:  # noqa: BLE001
        internal_error("llm.content")


def _phase_spans(call: FinishedCall, phases: CallPhases, end_ns: int) -> None:
    """``network`` (connection setup, upload, round trip), ``prefill`` and
    ``output_generation`` children, laid out from the span start as the processor lays out
    the call's intervals (the same tiling: ``codec.phase_span_tiles_of``).

    The stream's tail stays on the parent (``agent_latency.llm.tail``): three children at
    most, each with one attribute (OpenInference's span kind), keeps the per-call cost down;
    they are handed to the processors finished (``_sdk.emit_finished_children``), through
    the tracer only where that cannot be done.
    """
    tracer = call.tracer
    tiles = phase_span_tiles_of(phases.items(), call.start_ns, end_ns)
    if not tiles or emit_finished_children(tracer, call.span, tiles, _PHASE_ATTRIBUTES):
        return
    for name, start, end in tiles:
        tracer.start_span(name, context=call.context, start_time=start,
                          attributes=semconv.PHASE_SPAN_ATTRIBUTES).end(end_time=end)


_PHASE_ATTRIBUTES = frozen_attributes(semconv.PHASE_SPAN_ATTRIBUTES)


def _metrics(call: FinishedCall, duration: float, phases: CallPhases, attrs: dict[str, Any],
             error: BaseException | None, per_chunk: float | None) -> None:
    inst = call.settings.instruments()
    base: dict[str, Any] = {
        semconv.GEN_AI_OPERATION_NAME: call.endpoint.operation,
        semconv.GEN_AI_PROVIDER_NAME: call.provider,
    }
    for key, value in ((semconv.GEN_AI_REQUEST_MODEL, call.model),
                       (semconv.GEN_AI_RESPONSE_MODEL, call.info.response_model),
                       (semconv.SERVER_ADDRESS, call.server_address),
                       (semconv.SERVER_PORT, call.server_port)):
        if value:
            base[key] = value
    if error is not None:
        base[semconv.ERROR_TYPE] = type(error).__qualname__
    inst.duration(duration, base)
    if error is None:
        for tokens, kind in ((call.info.input_tokens, "input"),
                             (call.info.output_tokens, "output")):
            if tokens is not None:
                inst.tokens(tokens, {**base, semconv.GEN_AI_TOKEN_TYPE: kind})
    if call.t_first_chunk is not None:
        inst.ttfc(call.t_first_chunk - call.t_call, base)
    if call.t_first is not None:
        inst.ttft(call.t_first - call.t_call, base)
    if per_chunk is not None:
        inst.tpoc(per_chunk, base)
    tps = attrs.get(semconv.LLM_OUTPUT_TOKENS_PER_SECOND)
    if call.t_first is None:  # speeds only when measured, not estimated
        return
    if tps is not None:
        inst.tps(tps, base)
    prefill_tps = attrs.get(semconv.LLM_PREFILL_TOKENS_PER_SECOND)
    if prefill_tps is not None:
        inst.prefill_tps(prefill_tps, base)
