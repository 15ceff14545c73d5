"""Spans shaped like an instrumented agent's, for the benchmarks that encode or read them:
one CLIENT span per LLM call with its ~30 attributes and three phase children, a tool span
per call, and the task span with its budget."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from agent_latency import semconv


class _Keep(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def llm_call_attributes(i: int) -> dict[str, Any]:
    """What one streamed chat call's span carries (the i-th of its task)."""
    return {
        semconv.GEN_AI_OPERATION_NAME: "chat",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.GEN_AI_REQUEST_MODEL: "gpt-5-mini",
        semconv.GEN_AI_REQUEST_MAX_TOKENS: 4096,
        semconv.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        semconv.GEN_AI_REQUEST_STREAM: True,
        semconv.GEN_AI_RESPONSE_MODEL: "gpt-5-mini-2025-08-07",
        semconv.GEN_AI_RESPONSE_ID: f"chatcmpl-{i:024d}",
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 12_345 + i,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 321,
        semconv.SERVER_ADDRESS: "api.openai.com",
        semconv.SERVER_PORT: 443,
        semconv.LLM_CLIENT: 0.0012,
        semconv.LLM_STREAMING: True,
        semconv.LLM_TTFT: 0.41234,
        semconv.LLM_RETRY: 0.0,
        semconv.LLM_DNS: 0.0,
        semconv.LLM_CONNECT: 0.0,
        semconv.LLM_TLS: 0.0,
        semconv.LLM_UPLOAD: 0.0021,
        semconv.LLM_RTT: 0.0123,
        semconv.LLM_RTT_SOURCE: "tcp_info",
        semconv.LLM_PREFILL: 0.3881,
        semconv.LLM_OUTPUT_GENERATION: 2.104,
        semconv.LLM_TAIL: 0.0003,
        semconv.LLM_CLIENT_TAIL: 0.0001,
        semconv.LLM_CONNECTION_REUSED: True,
        semconv.LLM_ATTEMPTS: 1,
        semconv.LLM_CHUNKS: 322,
        semconv.LLM_OUTPUT_TOKENS_PER_SECOND: 152.1,
    }


def tool_attributes(i: int) -> dict[str, Any]:
    """What one subprocess tool's span carries."""
    return {
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_EXECUTE_TOOL,
        semconv.GEN_AI_TOOL_NAME: "pytest",
        semconv.COMPONENT: semconv.TOOL_EXECUTION,
        semconv.TOOL_SOURCE: "subprocess",
        semconv.TOOL_EXECUTABLE: "/usr/bin/python3",
        semconv.TOOL_COMMAND: f"python -m pytest -x -q tests/test_module_{i}.py",
        semconv.TOOL_PID: 4242 + i,
        semconv.TOOL_EXIT_CODE: 0,
    }


def task_spans(calls: int, *, tools: bool = True) -> list[ReadableSpan]:
    """One task's spans, in the order they end (the task last): ``calls`` LLM calls, each
    with its three phase children and (``tools``) a tool after it."""
    keep = _Keep()
    provider = TracerProvider(resource=Resource.create({
        "service.name": "agent", "process.pid": os.getpid(), "host.name": "bench"}))
    provider.add_span_processor(keep)
    tracer = provider.get_tracer("agent_latency", "0.1")
    with tracer.start_as_current_span("invoke_agent fix", attributes={
            semconv.TASK_NAME: "fix"}) as task:
        for i in range(calls):
            with tracer.start_as_current_span("chat gpt-5-mini", kind=SpanKind.CLIENT) as call:
                call.set_attributes(llm_call_attributes(i))
                for phase in ("network", "prefill", "output_generation"):
                    with tracer.start_as_current_span(
                            phase, attributes=semconv.PHASE_SPAN_ATTRIBUTES):
                        pass
                call.set_status(Status(StatusCode.OK))
            if tools:
                with tracer.start_as_current_span("execute_tool pytest",
                                                  attributes=tool_attributes(i)):
                    pass
        task.set_attributes({semconv.BUDGET_WALL: 61.5, **{
            semconv.budget_share(c): 12.3 for c in semconv.COMPONENTS}, **{
            semconv.budget_count(c): calls for c in semconv.COUNT_NAMES}})
    return keep.spans
