"""Every span attribute, span name and metric name agent-latency writes, in one place.

The GenAI names follow the OpenTelemetry GenAI semantic conventions v1.41; everything of
ours lives under the ``agent_latency.`` prefix.  ``docs/semconv.md`` lists them for users.
"""

from __future__ import annotations

from typing import Final

from .budget import _interval as _budget_names

# --- GenAI semantic conventions (v1.41) -------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

OPERATION_CHAT: Final = "chat"
OPERATION_EMBEDDINGS: Final = "embeddings"
OPERATION_TEXT_COMPLETION: Final = "text_completion"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
OPERATION_INVOKE_AGENT: Final = "invoke_agent"

# GenAI metrics and their bucket boundaries.
GEN_AI_CLIENT_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
GEN_AI_CLIENT_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.operation.time_per_output_chunk"
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)
TOKEN_BUCKETS: Final = tuple(4**i for i in range(14))  # 1, 4, 16, ... 67108864

# --- agent-latency: tasks and the budget ------------------------------------------------
TASK_NAME: Final = "agent_latency.task.name"
COMPONENT: Final = "agent_latency.component"

# The component and count names are the budget engine's (``budget._interval``, used by the
# task tree); re-exported here as the values of ``agent_latency.component`` and the
# ``agent_latency.count.*`` suffixes.
OUTPUT_GENERATION: Final = _budget_names.OUTPUT_GENERATION
PREFILL: Final = _budget_names.PREFILL
TOOL_EXECUTION: Final = _budget_names.TOOL_EXECUTION
NETWORK_OVERHEAD: Final = _budget_names.NETWORK_OVERHEAD
OTHER: Final = _budget_names.OTHER
COMPONENTS: Final = _budget_names.COMPONENTS
COUNT_NAMES: Final = _budget_names.COUNT_NAMES

BUDGET_PREFIX: Final = "agent_latency.budget."
BUDGET_WALL: Final = "agent_latency.budget.wall"


def budget_share(component: str) -> str:
    """Attribute name of a component's share of the task's wall time."""
    return BUDGET_PREFIX + component


def budget_busy(component: str) -> str:
    """Attribute name of a component's busy time (plain sum of its intervals)."""
    return BUDGET_PREFIX + component + ".busy"


def budget_count(count: str) -> str:
    """Attribute name of one of the task's counts (``llm_calls``, ``tool_calls`` …)."""
    return "agent_latency.count." + count


#: The parts of ``other`` (``gc``, ``imports``, ``lag``, ``cpu``, ``idle``), in priority
#: order: the budget engine's names, as the suffixes of ``agent_latency.budget.other.*`` and
#: the values of ``agent_latency.other.part``.
OTHER_PARTS: Final = _budget_names.OTHER_PARTS


def budget_other_part(part: str) -> str:
    """Attribute name of one part of the task's ``other`` time (``gc``, ``imports`` …)."""
    return BUDGET_PREFIX + OTHER + "." + part


# Seconds from a process task's start to the moment agent-latency began timing imports
# (interpreter start-up; for instrument() called by the program, what ran before it): part
# of the task's ``imports`` time.
TASK_STARTUP: Final = "agent_latency.task.startup"
BUDGET_OUTPUT_TOKENS_PER_SECOND: Final = "agent_latency.budget.output_tokens_per_second"
BUDGET_PREFILL_TOKENS_PER_SECOND: Final = "agent_latency.budget.prefill_tokens_per_second"

# --- agent-latency: one LLM call --------------------------------------------------------
LLM_TTFT: Final = "agent_latency.llm.ttft"
LLM_CLIENT: Final = "agent_latency.llm.client"
LLM_RETRY: Final = "agent_latency.llm.retry"
LLM_DNS: Final = "agent_latency.llm.dns"
LLM_CONNECT: Final = "agent_latency.llm.connect"
LLM_TLS: Final = "agent_latency.llm.tls"
LLM_UPLOAD: Final = "agent_latency.llm.upload"
LLM_RTT: Final = "agent_latency.llm.rtt"
LLM_RTT_SOURCE: Final = "agent_latency.llm.rtt.source"
LLM_PREFILL: Final = "agent_latency.llm.prefill"
LLM_QUEUE: Final = "agent_latency.llm.queue"
LLM_OUTPUT_GENERATION: Final = "agent_latency.llm.output_generation"
LLM_TAIL: Final = "agent_latency.llm.tail"
LLM_CLIENT_TAIL: Final = "agent_latency.llm.client_tail"
LLM_CLIENT_BUSY: Final = "agent_latency.llm.client_busy"
# When the first output token's bytes reached this host, against when the SDK handed it over.
LLM_FIRST_TOKEN_SOURCE: Final = "agent_latency.llm.first_token.source"
LLM_FIRST_TOKEN_BOUND: Final = "agent_latency.llm.first_token.bound"
LLM_LAST_TOKEN_SOURCE: Final = "agent_latency.llm.last_token.source"
LLM_LAST_TOKEN_BOUND: Final = "agent_latency.llm.last_token.bound"
LLM_CLIENT_LAG: Final = "agent_latency.llm.client_lag"
# How far behind the wire the program was at the last output token: its hand-over minus its
# arrival (0 where the hand-over is the mark).  A what-if keeps a client's pace when it was.
LLM_LAST_TOKEN_LAG: Final = "agent_latency.llm.last_token.lag"
ARRIVAL_MEASURED: Final = "measured"
ARRIVAL_ESTIMATED: Final = "estimated"
ARRIVAL_READ: Final = "read"
ARRIVAL_HANDED_OVER: Final = "handed-over"
LLM_NETWORK: Final = "agent_latency.llm.network"
LLM_TIMING_SOURCE: Final = "agent_latency.llm.timing.source"
LLM_CONNECTION_REUSED: Final = "agent_latency.llm.connection_reused"
LLM_ATTEMPTS: Final = "agent_latency.llm.attempts"
LLM_STREAMING: Final = "agent_latency.llm.streaming"
LLM_OUTPUT_TOKENS_PER_SECOND: Final = "agent_latency.llm.output_tokens_per_second"
LLM_PREFILL_TOKENS_PER_SECOND: Final = "agent_latency.llm.prefill_tokens_per_second"
LLM_CHUNKS: Final = "agent_latency.llm.chunks"
#: True on a call whose stream was still open when its task ended: ended there, at its last
#: chunk read, and counted in that task.
LLM_ABANDONED: Final = "agent_latency.llm.abandoned"

SOURCE_MEASURED: Final = "measured"
SOURCE_SERVER_REPORTED: Final = "server-reported"
SOURCE_ESTIMATED: Final = "estimated"
SOURCE_NOT_SPLIT: Final = "not-split"

# The order in which one call's phases follow each other in time; each maps to the budget
# component it counts as.  The processor and the offline report rebuild a call's intervals
# from the span start and these durations, so the order is part of the format.
LLM_PHASES: Final = tuple((attr, phase, _budget_names.PHASE_COMPONENT[phase])
                          for attr, phase in (
    (LLM_RETRY, "retry"),
    (LLM_CLIENT, "client"),
    (LLM_DNS, "dns"),
    (LLM_CONNECT, "connect"),
    (LLM_TLS, "tls"),
    (LLM_UPLOAD, "upload"),
    (LLM_RTT, "rtt"),
    (LLM_PREFILL, "prefill"),
    (LLM_OUTPUT_GENERATION, "output_generation"),
    (LLM_TAIL, "tail"),
    (LLM_CLIENT_TAIL, "client_tail"),
))

# --- agent-latency: tools ---------------------------------------------------------------
TOOL_EXIT_CODE: Final = "agent_latency.tool.exit_code"
TOOL_PID: Final = "agent_latency.tool.pid"
TOOL_EXECUTABLE: Final = "agent_latency.tool.executable"
TOOL_COMMAND: Final = "agent_latency.tool.command"

# --- metrics of ours --------------------------------------------------------------------
METRIC_TASK_DURATION: Final = "agent_latency.task.duration"
# One point per part of ``other`` per task (attribute ``agent_latency.other.part``).
METRIC_TASK_OTHER: Final = "agent_latency.task.other"
OTHER_PART: Final = "agent_latency.other.part"
# Tasks run for minutes to hours: the GenAI duration buckets (up to 81.92 s) continued by
# doubling to 5242.88 s (87 min), so a p95 of an hour-long task does not flatline.
TASK_DURATION_BUCKETS: Final = (
    *DURATION_BUCKETS, 163.84, 327.68, 655.36, 1310.72, 2621.44, 5242.88,
)
# One point per finished task: its wall time.  By task name only when asked
# (ENV_METRIC_TASK_NAMES): names are free text, so the label is off by default and, when
# on, bounded by ENV_METRIC_TASK_NAMES_LIMIT distinct names; later names share
# TASK_NAME_OVERFLOW.
METRIC_TASK_WALL_TIME: Final = "agent_latency.task.wall_time"
ENV_METRIC_TASK_NAMES: Final = "AGENT_LATENCY_METRIC_TASK_NAMES"
ENV_METRIC_TASK_NAMES_LIMIT: Final = "AGENT_LATENCY_METRIC_TASK_NAMES_LIMIT"
DEFAULT_METRIC_TASK_NAMES_LIMIT: Final = 100
TASK_NAME_OVERFLOW: Final = "_other"
METRIC_LLM_TIME_TO_FIRST_TOKEN: Final = "agent_latency.llm.time_to_first_token"
METRIC_LLM_OUTPUT_TOKENS_PER_SECOND: Final = "agent_latency.llm.output_tokens_per_second"
TOKENS_PER_SECOND_BUCKETS: Final = (
    1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0, 6400.0,
)
# Dashboards and alerts: prefill speed per call, new connections per task, tool
# time by tool.  The prefill metric shares its name with the span attribute it aggregates.
METRIC_LLM_PREFILL_TOKENS_PER_SECOND: Final = "agent_latency.llm.prefill_tokens_per_second"
PREFILL_TOKENS_PER_SECOND_BUCKETS: Final = (
    10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 25000.0,
    50000.0, 100000.0,
)
METRIC_TASK_NEW_CONNECTIONS: Final = "agent_latency.task.new_connections"
COUNT_BUCKETS: Final = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
METRIC_TOOL_DURATION: Final = "agent_latency.tool.duration"

# --- environment variables of ours ----------------------------------------------------
ENV_CAPTURE_COMMAND: Final = "AGENT_LATENCY_CAPTURE_COMMAND"
ENV_PHASE_SPANS: Final = "AGENT_LATENCY_PHASE_SPANS"
ENV_PROPAGATE: Final = "AGENT_LATENCY_PROPAGATE"
# When arrival times are taken from the wire: ``auto`` (a stream's first token, and the rest
# while the client may be late), ``always``, ``first`` (the first token only), ``off``
# (hand-over times only).
ENV_ARRIVALS: Final = "AGENT_LATENCY_ARRIVALS"
ARRIVALS_CHOICES: Final = ("auto", "always", "first", "off")
ENV_OUTPUT_DIR: Final = "AGENT_LATENCY_DIR"
ENV_SUMMARY: Final = "AGENT_LATENCY_SUMMARY"
ENV_MAX_OPEN_TASKS: Final = "AGENT_LATENCY_MAX_OPEN_TASKS"
ENV_TASK_MAX_AGE: Final = "AGENT_LATENCY_TASK_MAX_AGE"
ENV_EXIT_TIMEOUT: Final = "AGENT_LATENCY_EXIT_TIMEOUT"

# --- tools: processes, MCP, framework tools -----------------------------------
TOOL_TYPE_FUNCTION: Final = "function"
TOOL_TYPE_EXTENSION: Final = "extension"
# Where a tool span comes from: "subprocess", "os.system", "mcp", "openai_agents", "langchain",
# "smolagents".
TOOL_SOURCE: Final = "agent_latency.tool.source"
TOOL_SIGNAL: Final = "agent_latency.tool.signal"
TOOL_TIMED_OUT: Final = "agent_latency.tool.timed_out"
TOOL_RUNNING_AT_EXIT: Final = "agent_latency.tool.running_at_exit"
# MCP semantic conventions (client side of tools/call).
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
NETWORK_TRANSPORT: Final = "network.transport"
NETWORK_PROTOCOL_NAME: Final = "network.protocol.name"
# Client-measured parts of one MCP call and the server's own time when it reports one.
MCP_SERVER_TIME: Final = "agent_latency.mcp.server_time"
MCP_TRANSPORT: Final = "agent_latency.mcp.transport"
# Key a server puts in a tools/call result's ``_meta`` to report its own handling time (s).
MCP_META_SERVER_DURATION: Final = "io.agent-latency/server_duration"
# `agent-latency run`: the whole process as one task.
RUN_TASK: Final = "agent_latency.run"
ENV_RUN: Final = "AGENT_LATENCY_RUN"
ENV_RUN_CHILDREN: Final = "AGENT_LATENCY_RUN_CHILDREN"
# instrument() alone: the whole process as one task (the implicit process task), unless off.
PROCESS_TASK: Final = "agent_latency.process"
ENV_PROCESS_TASK: Final = "AGENT_LATENCY_PROCESS_TASK"
# A span said at exit when spans found the export queue full: how many were dropped (the
# report states it).
SPANS_LOST: Final = "agent_latency.spans_lost"
SPANS_LOST_SPAN: Final = "agent-latency spans lost"

# --- agent-latency: LLM calls (instrumentation of openai / anthropic) -------------------
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
LLM_TIME_PER_OUTPUT_CHUNK: Final = "agent_latency.llm.time_per_output_chunk"
LLM_SERVER_REQUEST_ID: Final = "agent_latency.llm.server_request_id"
LLM_RETRY_ERRORS: Final = "agent_latency.llm.retry.errors"
PROVIDER_OPENAI: Final = "openai"
PROVIDER_ANTHROPIC: Final = "anthropic"
PROVIDER_GCP_GEMINI: Final = "gcp.gemini"
PROVIDER_GCP_VERTEX_AI: Final = "gcp.vertex_ai"
# gen_ai.provider.name values of the GenAI conventions for providers other than the above
# (named from the client library or the host), and ours where the conventions have none.
PROVIDER_GROQ: Final = "groq"
PROVIDER_MISTRAL_AI: Final = "mistral_ai"
PROVIDER_DEEPSEEK: Final = "deepseek"
PROVIDER_X_AI: Final = "x_ai"
PROVIDER_PERPLEXITY: Final = "perplexity"
PROVIDER_COHERE: Final = "cohere"
PROVIDER_AWS_BEDROCK: Final = "aws.bedrock"
PROVIDER_AZURE_AI_OPENAI: Final = "azure.ai.openai"
PROVIDER_AZURE_AI_INFERENCE: Final = "azure.ai.inference"
PROVIDER_IBM_WATSONX_AI: Final = "ibm.watsonx.ai"
PROVIDER_OLLAMA: Final = "ollama"
PROVIDER_HUGGINGFACE: Final = "huggingface"
# A model request no protocol of ours knows (a generic span).
PROVIDER_UNKNOWN: Final = "unknown"
# The wire protocol a call was read with: "openai", "anthropic", "gemini", "ollama",
# "cohere", "bedrock", or "generic" (a request that looked like a model call but matched no
# protocol: its first response byte is its first token).
LLM_PROTOCOL: Final = "agent_latency.llm.protocol"
PROTOCOL_GENERIC: Final = "generic"
# Generic spans for model requests no protocol knows, and their notice: on unless "off".
ENV_GENERIC_CALLS: Final = "AGENT_LATENCY_GENERIC_CALLS"
# Timings the server reported of itself (seconds), beside the measured phases; their
# source is always ``server-reported``.  Ollama's prompt_eval/eval/load durations, Groq's
# and Cerebras' usage timings, vLLM's metrics, Bedrock's metrics.latencyMs, the
# openai-processing-ms header.  A non-streamed call splits prefill from output with them.
# (The server's queueing is agent_latency.llm.queue.)
LLM_SERVER_PREFILL: Final = "agent_latency.llm.server.prefill"
LLM_SERVER_OUTPUT_GENERATION: Final = "agent_latency.llm.server.output_generation"
LLM_SERVER_LOAD: Final = "agent_latency.llm.server.load"
LLM_SERVER_TOTAL: Final = "agent_latency.llm.server.total"
LLM_SERVER_TIMING_SOURCE: Final = "agent_latency.llm.server.timing.source"
# Child spans of an LLM call span, made after the fact; they carry neither
# ``agent_latency.component`` nor ``agent_latency.llm.client`` (never counted twice).
SPAN_NETWORK: Final = "network"
SPAN_PREFILL: Final = "prefill"
SPAN_OUTPUT_GENERATION: Final = "output_generation"
# OpenInference's span kind, on the spans that would otherwise show as UNKNOWN in Phoenix and
# other OpenInference-aware UIs (the phase children; theirs is inferred from gen_ai.*).
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
PHASE_SPAN_ATTRIBUTES: Final = {OPENINFERENCE_SPAN_KIND: "CHAIN"}
ENV_CAPTURE_MESSAGE_CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
RTT_SOURCE_TCP_INFO: Final = "tcp_info"
RTT_SOURCE_CONNECT: Final = "connect"
RTT_SOURCE_LAST_SEEN: Final = "last_seen"
RTT_SOURCE_NONE: Final = "none"
# One span event per failed attempt of an LLM call (its own phases), on the call span.
LLM_ATTEMPT_EVENT: Final = "agent_latency.llm.attempt"
LLM_ATTEMPT_DURATION: Final = "agent_latency.llm.attempt.duration"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"

# --- network: persistent connections, socket phases, per-task counts ----------
# How an LLM call reached its server: "http" (one HTTP request) or "websocket" (one
# ``response.create`` on a persistent WebSocket).
LLM_TRANSPORT: Final = "agent_latency.llm.transport"
TRANSPORT_HTTP: Final = "http"
TRANSPORT_WEBSOCKET: Final = "websocket"
# Handshake round trips the call did not pay because its connection was already open
# (TCP, plus TLS on an encrypted one); 0 for a call that opened its connection.
LLM_ROUND_TRIPS_AVOIDED: Final = "agent_latency.llm.round_trips_avoided"
LLM_WS_MESSAGES_SENT: Final = "agent_latency.llm.ws.messages_sent"
LLM_WS_MESSAGES_RECEIVED: Final = "agent_latency.llm.ws.messages_received"
LLM_BYTES_SENT: Final = "agent_latency.llm.bytes_sent"
LLM_BYTES_RECEIVED: Final = "agent_latency.llm.bytes_received"
# The span of one persistent connection's setup (DNS, TCP connect, TLS, WebSocket upgrade),
# charged once, to the task that opened it (``agent_latency.component`` network_overhead).
SPAN_CONNECTION_SETUP: Final = "connection.setup"
NET_UPGRADE: Final = "agent_latency.net.upgrade"
# The client's own work inside a setup span (building the request, first-use imports),
# before and between the socket operations: budget other, not network.
NET_CLIENT: Final = "agent_latency.net.client"
# Per task: the share of round trips that reused an open connection, and the setup time
# (DNS, connect, TLS, upgrade) after each host's first connection, which a persistent or
# reused connection would have saved.
BUDGET_CONNECTION_REUSE_RATIO: Final = "agent_latency.budget.connection_reuse_ratio"
BUDGET_CONNECTION_SETUP_SAVING: Final = "agent_latency.budget.connection_setup_saving"
