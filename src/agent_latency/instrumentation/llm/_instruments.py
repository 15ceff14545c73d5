"""The histograms an LLM call is recorded on (the GenAI conventions' and ours)."""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics

from ... import semconv
from ..._sdk import plain_recorder


class Instruments:
    """Every histogram of one meter provider, created once, each as its ``record``
    (``recorder(amount, attributes)``) for the attributes a call builds
    (:func:`agent_latency._sdk.plain_recorder`)."""

    __slots__ = ("duration", "prefill_tps", "provider", "tokens", "tps", "tpoc", "ttfc",
                 "ttft")

    def __init__(self, provider: Any) -> None:
        meter = provider.get_meter("agent_latency")
        buckets = list(semconv.DURATION_BUCKETS)
        self.provider = provider
        self.duration = _recorder(
            meter, semconv.GEN_AI_CLIENT_OPERATION_DURATION, unit="s",
            description="GenAI operation duration.", explicit_bucket_boundaries_advisory=buckets)
        self.tokens = _recorder(
            meter, semconv.GEN_AI_CLIENT_TOKEN_USAGE, unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(semconv.TOKEN_BUCKETS))
        self.ttfc = _recorder(
            meter, semconv.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK, unit="s",
            description="Time to receive the first chunk of a streaming response.",
            explicit_bucket_boundaries_advisory=buckets)
        self.tpoc = _recorder(
            meter, semconv.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK, unit="s",
            description="Mean time between output chunks of one streaming call "
                        "(recorded once per call).",
            explicit_bucket_boundaries_advisory=buckets)
        self.ttft = _recorder(
            meter, semconv.METRIC_LLM_TIME_TO_FIRST_TOKEN, unit="s",
            description="Time from the call to the first output token.",
            explicit_bucket_boundaries_advisory=list(semconv.TIME_TO_FIRST_TOKEN_BUCKETS))
        self.tps = _recorder(
            meter, semconv.METRIC_LLM_OUTPUT_TOKENS_PER_SECOND, unit="{token}/s",
            description="Output tokens per second of output generation.",
            explicit_bucket_boundaries_advisory=list(semconv.TOKENS_PER_SECOND_BUCKETS))
        self.prefill_tps = _recorder(
            meter, semconv.METRIC_LLM_PREFILL_TOKENS_PER_SECOND, unit="{token}/s",
            description="Input tokens per second of prefill (measured streams only).",
            explicit_bucket_boundaries_advisory=list(
                semconv.PREFILL_TOKENS_PER_SECOND_BUCKETS))


def _recorder(meter: Any, name: str, **kwargs: Any) -> Any:
    return plain_recorder(meter.create_histogram(name, **kwargs))


_global: Instruments | None = None


def global_instruments() -> Instruments:
    """The instruments of the global meter provider, rebuilt when it changes."""
    global _global
    provider = metrics.get_meter_provider()
    current = _global
    if current is None or current.provider is not provider:
        current = _global = Instruments(provider)
    return current
