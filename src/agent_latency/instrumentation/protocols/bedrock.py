"""Amazon Bedrock's runtime protocol (``boto3.client("bedrock-runtime")``).

- Endpoints: ``POST /model/MODEL_ID/converse`` and ``/converse-stream`` (Bedrock's own
  message shape), ``/model/MODEL_ID/invoke`` and ``/invoke-with-response-stream`` (the
  model's native body, say Anthropic's Messages); the model is in the path (URL-encoded).
- Framing: a streamed reply is an AWS event stream (``application/vnd.amazon.eventstream``):
  binary messages, each a prelude (total length, headers length, the prelude's CRC32), string
  headers (``:event-type``, ``:message-type``, ``:content-type``), a JSON payload and the
  message's CRC32.  ConverseStream's events are ``messageStart``, ``contentBlockStart``,
  ``contentBlockDelta``, ``contentBlockStop``, ``messageStop`` and ``metadata``;
  InvokeModelWithResponseStream's are ``chunk`` events whose ``bytes`` (base64) carry the
  model's own stream event.
- Output: ``contentBlockDelta``; in a ``chunk``, the model's output event (Anthropic's
  ``content_block_delta``; Titan's ``outputText``, Llama's ``generation``).
- Usage: Converse's ``usage.{inputTokens, outputTokens}`` (on the reply, or the stream's
  ``metadata`` event); InvokeModel's ``x-amzn-bedrock-input-token-count`` /
  ``-output-token-count`` headers, or a stream's last chunk's
  ``amazon-bedrock-invocationMetrics``.  Server timings: ``metrics.latencyMs`` (Converse),
  the ``x-amzn-bedrock-invocation-latency`` header, ``invocationLatency`` and
  ``firstByteLatency`` (milliseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from ... import semconv
from ._endpoint import Endpoint, int_or_none, seconds
from ._events import OutputRule, classifier
from ._framing import EVENT_STREAM
from ._protocol import Route, WireProtocol
from .anthropic import OUTPUT as ANTHROPIC_OUTPUT

OUTPUT = OutputRule(output_names=frozenset({"contentBlockDelta"}),
                    text_fields=("outputText", "generation", "completion"))
_MS = 1e-3
_METRICS = "amazon-bedrock-invocationMetrics"


# -- Converse and ConverseStream -------------------------------------------------------------
def _converse_usage(info: Any, usage: Any, metrics: Any) -> None:
    if usage is not None:
        info.input_tokens = int_or_none(usage.input_tokens)
        info.output_tokens = int_or_none(usage.output_tokens)
        cache_read = int_or_none(usage.cache_read_input_tokens)
        if cache_read is not None:
            info.cache_read = cache_read
    if metrics is not None:
        info.server_total = seconds(metrics.latency_ms, _MS)


def _converse_observe(state: Any, chunk: Any) -> bool:
    delta = chunk.delta
    if delta is not None:
        if state.content is not None and delta.text:
            state.content.append(delta.text)
        return True
    if chunk.stop_reason is not None:
        state.meta_chunk = chunk
    elif chunk.usage is not None:
        state.usage_chunk = chunk
    return False


def _converse_response(call: Any, obj: Any) -> None:
    info = call.info
    if obj.stop_reason:
        info.finish_reasons = [str(obj.stop_reason)]
    _converse_usage(info, obj.usage, obj.metrics)
    if call.capture:
        message = getattr(obj.output, "message", None)
        info.output_text = "".join(c.text or "" for c in getattr(message, "content", None)
                                   or ())


def _converse_stream(call: Any) -> None:
    meta, usage = call.meta_chunk, call.usage_chunk
    if meta is not None and meta.stop_reason:
        call.info.finish_reasons = [str(meta.stop_reason)]
    if usage is not None:
        _converse_usage(call.info, usage.usage, usage.metrics)


# -- InvokeModel and InvokeModelWithResponseStream (the model's own body) ---------------------
def _invocation_metrics(info: Any, chunk: Any) -> None:
    metrics = chunk.model_extra.get(_METRICS) if chunk is not None else None
    if isinstance(metrics, Mapping):
        info.input_tokens = int_or_none(metrics.get("inputTokenCount"))
        info.output_tokens = int_or_none(metrics.get("outputTokenCount"))
        info.server_total = seconds(metrics.get("invocationLatency"), _MS)
        info.server_prefill = seconds(metrics.get("firstByteLatency"), _MS)


def _invoke_observe(state: Any, chunk: Any) -> bool:
    extra = chunk.model_extra
    if _METRICS in extra:
        state.usage_chunk = chunk
    kind = extra.get("type")
    if kind == "content_block_delta":
        return True
    if kind == "message_delta" or extra.get("stop_reason") or extra.get("completionReason"):
        state.meta_chunk = chunk
        return False
    return bool(extra.get("outputText") or extra.get("generation")
                or extra.get("completion"))


def _stop_reason(info: Any, obj: Any) -> None:
    reason = (getattr(obj.delta, "stop_reason", None) if obj.delta is not None else None) \
        or obj.stop_reason or obj.completion_reason
    if reason:
        info.finish_reasons = [str(reason)]


def _invoke_response(call: Any, obj: Any) -> None:
    info = call.info
    info.response_id = obj.id
    info.response_model = obj.model
    _stop_reason(info, obj)
    usage = obj.usage
    if usage is not None:
        info.input_tokens = int_or_none(usage.input_tokens)
        info.output_tokens = int_or_none(usage.output_tokens)


def _invoke_stream(call: Any) -> None:
    info = call.info
    first = call.first_chunk
    message = first.message if first is not None else None
    if message is not None:
        info.response_id = message.id
        info.response_model = message.model
    if call.meta_chunk is not None:
        _stop_reason(info, call.meta_chunk)
    _invocation_metrics(info, call.usage_chunk)


def _invoke_headers(call: Any, headers: Mapping[str, str]) -> None:
    """InvokeModel's usage and latency headers (the body is the model's own)."""
    info = call.info
    for name, field in (("x-amzn-bedrock-input-token-count", "input_tokens"),
                        ("x-amzn-bedrock-output-token-count", "output_tokens")):
        value = headers.get(name)
        if value and value.isdigit() and getattr(info, field) is None:
            setattr(info, field, int(value))
    latency = headers.get("x-amzn-bedrock-invocation-latency")
    if latency and latency.isdigit() and info.server_total is None:
        info.server_total = int(latency) * _MS


CONVERSE = Endpoint(semconv.PROVIDER_AWS_BEDROCK, semconv.OPERATION_CHAT,
                    observe=_converse_observe, from_response=_converse_response,
                    from_stream=_converse_stream)
INVOKE = Endpoint(semconv.PROVIDER_AWS_BEDROCK, semconv.OPERATION_CHAT,
                  observe=_invoke_observe, from_response=_invoke_response,
                  from_stream=_invoke_stream, server_timing=_invoke_headers)

_ACTIONS = {"converse": (CONVERSE, False), "converse-stream": (CONVERSE, True),
            "invoke": (INVOKE, False), "invoke-with-response-stream": (INVOKE, True)}


def route(path: str) -> Route | None:
    """The endpoint a ``POST`` to ``path`` is, if it is one of this protocol's."""
    if not path.startswith("/model/"):
        return None
    model, _, action = path[7:].rpartition("/")
    found = _ACTIONS.get(action)
    if found is None or not model:
        return None
    return Route(found[0], unquote(model), found[1])


PROTOCOL = WireProtocol("bedrock", route, classifier(OUTPUT, ANTHROPIC_OUTPUT),
                        semconv.PROVIDER_AWS_BEDROCK, EVENT_STREAM)
