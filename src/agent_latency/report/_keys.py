"""The span attributes the report reads: no others are decoded."""

from __future__ import annotations

from .. import semconv
from ..budget import COMPONENTS, COUNT_NAMES

#: The attributes the report reads (budgets, counts, per-call figures, the budget the process
#: recorded); no others are decoded.  None of the long strings (prompts, command lines):
#: keeping nothing else bounds a trace's memory and saves most of the decoding.
BUDGET_KEYS = frozenset({
    *(attr for attr, _, _ in semconv.LLM_PHASES),
    semconv.LLM_CLIENT, semconv.LLM_TTFT, semconv.LLM_ATTEMPTS,
    semconv.LLM_CONNECTION_REUSED, semconv.LLM_STREAMING, semconv.LLM_TIMING_SOURCE,
    semconv.LLM_OUTPUT_TOKENS_PER_SECOND, semconv.LLM_PREFILL_TOKENS_PER_SECOND,
    semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
    semconv.GEN_AI_REQUEST_MODEL, semconv.GEN_AI_RESPONSE_MODEL, semconv.GEN_AI_TOOL_NAME,
    semconv.COMPONENT, semconv.TASK_NAME, semconv.PROCESS_TASK, semconv.RUN_TASK,
    semconv.BUDGET_WALL, semconv.BUDGET_OUTPUT_TOKENS_PER_SECOND,
    semconv.BUDGET_PREFILL_TOKENS_PER_SECOND,
    semconv.LLM_LAST_TOKEN_LAG, semconv.TASK_STARTUP, semconv.SPANS_LOST,
    semconv.LLM_FIRST_TOKEN_BOUND,
    *(semconv.budget_other_part(p) for p in semconv.OTHER_PARTS),
    *(semconv.budget_share(c) for c in COMPONENTS),
    *(semconv.budget_busy(c) for c in COMPONENTS),
    *(semconv.budget_count(c) for c in COUNT_NAMES),
})
