"""OTLP/JSON lines for hostile-input tests: a task with an LLM call and a tool, any names and
times, written the way a file from anywhere may hold them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from test_cli import BASE, SECOND
from test_cli import _value as value

from agent_latency import semconv

__all__ = ["BASE", "SECOND", "line", "run_cli", "span", "task_spans", "value", "write"]


def span(trace: str, span_id: int, parent: int | None, name: str, attrs: dict[str, Any],
         start: Any, end: Any) -> dict:
    """One OTLP/JSON span (times as given: an int is written as OTLP writes it, a string)."""
    out = {"traceId": trace, "spanId": f"{span_id:016x}", "name": name,
           "startTimeUnixNano": str(start) if isinstance(start, int) else start,
           "endTimeUnixNano": str(end) if isinstance(end, int) else end,
           "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()]}
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    return out


def task_spans(name: str, *, trace: str = "ab" * 16, tool: str | None = None,
               model: str | None = None, start: int = BASE,
               end: int | None = None, tool_times: tuple[Any, Any] | None = None) -> list[dict]:
    """A task ``name`` of one second with an LLM call on ``model`` (default: the name) and a
    tool ``tool`` (default: the name)."""
    end = start + SECOND if end is None else end
    tool_start, tool_end = tool_times or (start + SECOND // 2, start + 9 * SECOND // 10)
    llm = {attr: 0.0 for attr, _, _ in semconv.LLM_PHASES}
    llm.update({semconv.LLM_CLIENT: 0.001, semconv.LLM_PREFILL: 0.1,
                semconv.LLM_OUTPUT_GENERATION: 0.3, semconv.LLM_TTFT: 0.11,
                semconv.GEN_AI_REQUEST_MODEL: name if model is None else model,
                semconv.GEN_AI_USAGE_INPUT_TOKENS: 100,
                semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 30})
    return [
        span(trace, 1, None, f"invoke_agent {name}", {semconv.TASK_NAME: name}, start, end),
        span(trace, 2, 1, f"chat {name}", llm, start + SECOND // 10,
             start + SECOND // 10 + round(0.401 * SECOND)),
        span(trace, 3, 1, f"execute_tool {name}",
             {semconv.COMPONENT: semconv.TOOL_EXECUTION,
              semconv.GEN_AI_TOOL_NAME: name if tool is None else tool},
             tool_start, tool_end),
    ]


def line(spans: list[dict], service: str = "svc") -> str:
    """One export request as a line (``ensure_ascii``: lone surrogates written as JSON
    escapes, as any JSON encoder may)."""
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": value(service)}]},
        "scopeSpans": [{"spans": spans}]}]}) + "\n"


def write(path: Path, *traces: list[dict]) -> Path:
    """``path`` holding one line per trace."""
    path.write_text("".join(line(spans) for spans in traces), encoding="ascii")
    return path


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``agent-latency ARGS`` in a child process, its output as text (undecodable bytes
    replaced, so the test sees what a terminal would)."""
    return subprocess.run([sys.executable, "-m", "agent_latency", *args], cwd=cwd,
                          capture_output=True, text=True, encoding="utf-8",
                          errors="replace", timeout=timeout, env=env)
