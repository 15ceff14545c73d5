"""Generate agent-latency's Grafana dashboards (deploy/grafana/dashboards/*.json).

The JSON is committed (Grafana provisions it from deploy/grafana/dashboards); this script is
its source.  After changing a panel, run::

    python deploy/grafana/generate.py

tests/production/test_dashboards.py fails when the committed JSON differs from this
script's output, and evaluates every panel's PromQL against a real Prometheus.

Metric names are those of an OpenTelemetry Prometheus exporter (the agent's pull endpoint,
or the Collector's ``prometheus`` exporter): ``agent_latency.task.duration`` (unit s)
becomes ``agent_latency_task_duration_seconds_{bucket,sum,count}``; attributes become
labels with dots turned into underscores.  docs/production.md describes each panel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dashboard_b
from grafana_foundation_sdk.builders import piechart as piechart_b
from grafana_foundation_sdk.builders import prometheus as prometheus_b
from grafana_foundation_sdk.builders import timeseries as timeseries_b
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, piechart
from grafana_foundation_sdk.models import dashboard as dashboard_m

OUT_DIR = Path(__file__).resolve().parent / "dashboards"
PROMETHEUS = dashboard_m.DataSourceRef(type_val="prometheus", uid="prometheus")
RATE = "$__rate_interval"
# Label filters from the dashboard's variables. `job` is the agent's service.name (the
# Collector's prometheus exporter, and Prometheus' scrape job for an agent's own endpoint).
SERVICE = 'job=~"$service"'
LLM = f'{SERVICE}, gen_ai_provider_name=~"$provider", gen_ai_request_model=~"$model"'
BY_MODEL = "gen_ai_provider_name, gen_ai_request_model"

TASK_SUM = f"agent_latency_task_duration_seconds_sum{{{SERVICE}}}"
# Every task records one point per component: the count of any one component is the
# number of tasks.
TASK_COUNT = ("agent_latency_task_duration_seconds_count"
              f'{{{SERVICE}, agent_latency_component="other"}}')
TASK_WALL_BUCKET = f"agent_latency_task_wall_time_seconds_bucket{{{SERVICE}}}"
TTFT_BUCKET = "agent_latency_llm_time_to_first_token_seconds_bucket"
OUTPUT_TPS = "agent_latency_llm_output_tokens_per_second"
PREFILL_TPS = "agent_latency_llm_prefill_tokens_per_second"
LLM_CALLS = "gen_ai_client_operation_duration_seconds_count"
NEW_CONNECTIONS = "agent_latency_task_new_connections"
TOOL = "agent_latency_tool_duration_seconds"


def _query(expr: str, legend: str, ref: str = "A", *, exemplar: bool = False
           ) -> prometheus_b.Dataquery:
    query = (prometheus_b.Dataquery().expr(expr).legend_format(legend).ref_id(ref)
             .range().datasource(PROMETHEUS))
    if exemplar:
        # Exemplars (trace ids the SDK attached to histogram points) become points on the
        # graph linking to the trace in Tempo or Jaeger (the Prometheus data source's
        # exemplarTraceIdDestinations, deploy/grafana/provisioning/datasources).
        query = query.exemplar(True)
    return query


def _timeseries(title: str, description: str, unit: str, *, width: int = 12,
                stacking: common.StackingMode | None = None,
                fill: float = 10) -> timeseries_b.Panel:
    panel = (timeseries_b.Panel().title(title).description(description).unit(unit)
             .datasource(PROMETHEUS).span(width).height(8).fill_opacity(fill)
             .legend(common_b.VizLegendOptions().show_legend(True)
                     .display_mode(common.LegendDisplayMode.TABLE)
                     .placement(common.LegendPlacement.BOTTOM).calcs(["mean", "max"])))
    if stacking is not None:
        panel = panel.stacking(common_b.StackingConfig().mode(stacking))
    return panel


def _variable(name: str, label: str, metric_label: str) -> dashboard_b.QueryVariable:
    """A multi-value variable over the values of one label of the LLM call metric."""
    return (dashboard_b.QueryVariable(name).label(label).datasource(PROMETHEUS)
            .query(f"label_values({LLM_CALLS}, {metric_label})")
            .refresh(dashboard_m.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dashboard_m.VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*"))


def _quantiles(metric_bucket: str, by: str, selector: str, legend: str) -> list:
    return [_query(f"histogram_quantile({q}, sum by (le, {by}) "
                   f"(rate({metric_bucket}{{{selector}}}[{RATE}])))",
                   f"p{round(q * 100)} {legend}", ref, exemplar=True)
            for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))]


def _mean(metric: str, selector: str) -> str:
    return (f"sum by ({BY_MODEL}) (rate({metric}_sum{{{selector}}}[{RATE}]))\n"
            f"/ sum by ({BY_MODEL}) (rate({metric}_count{{{selector}}}[{RATE}]))")


def task_panels() -> list:
    """Where a task's wall time goes: the five components, in seconds and as shares."""
    per_task = _timeseries(
        "Task wall time by component (mean per task)",
        "Mean seconds per task spent in each budget component; the stack is the mean task "
        "wall time. Components: output generation, prefill, tool execution, network "
        "overhead, other (the agent's own work and waits).",
        "s", stacking=common.StackingMode.NORMAL, fill=60,
    ).with_target(_query(
        f"sum by (agent_latency_component) (rate({TASK_SUM}[{RATE}]))\n"
        f"/ on() group_left() sum(rate({TASK_COUNT}[{RATE}]))",
        "{{agent_latency_component}}"))
    shares = _timeseries(
        "Task wall time by component (share)",
        "Each component's share of all tasks' wall time over time (stacked to 100 %).",
        "percentunit", stacking=common.StackingMode.PERCENT, fill=60,
    ).with_target(_query(
        f"sum by (agent_latency_component) (rate({TASK_SUM}[{RATE}]))",
        "{{agent_latency_component}}"))
    pie = (piechart_b.Panel().title("Share of task wall time (whole range)")
           .description("Each component's share of the wall time of every task that ended "
                        "in the selected range.")
           .datasource(PROMETHEUS).span(8).height(8).unit("s")
           .pie_type(piechart.PieChartType.DONUT)
           .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
           .with_target(_query(
               f"sum by (agent_latency_component) (increase({TASK_SUM}[$__range]))",
               "{{agent_latency_component}}").instant()))
    rate = _timeseries(
        "Tasks per second", "Tasks that ended, per second.", "ops", width=8,
    ).with_target(_query(f"sum(rate({TASK_COUNT}[{RATE}]))", "tasks/s"))
    component_p95 = _timeseries(
        "Component time per task (p95)",
        "95th percentile, over tasks, of the seconds each component took in one task.",
        "s", width=8,
    ).with_target(_query(
        "histogram_quantile(0.95, sum by (le, agent_latency_component) "
        f"(rate(agent_latency_task_duration_seconds_bucket{{{SERVICE}}}[{RATE}])))",
        "p95 {{agent_latency_component}}", exemplar=True))
    wall = _timeseries(
        "Task wall time p50 / p95 (by task name when labelled)",
        "Wall time of whole tasks (buckets to 87 min). By task name when the agents set "
        "AGENT_LATENCY_METRIC_TASK_NAMES=true (at most AGENT_LATENCY_METRIC_TASK_NAMES_LIMIT "
        "names, then _other); one line per quantile otherwise.",
        "s", width=24,
    ).targets([_query(f"histogram_quantile({q}, sum by (le, agent_latency_task_name) "
                      f"(rate({TASK_WALL_BUCKET}[{RATE}])))",
                      f"p{round(q * 100)} {{{{agent_latency_task_name}}}}", ref,
                      exemplar=True)
               for q, ref in ((0.5, "A"), (0.95, "B"))])
    return [per_task, shares, pie, rate, component_p95, wall]


def llm_panels() -> list:
    """First token, speeds, errors and call rates of the LLM calls, by provider and model."""
    ttft = _timeseries(
        "Time to first token p50 / p95 / p99",
        "From the SDK call to the first output token (content, reasoning or tool-call "
        "arguments), by model and provider. Points are exemplars: click one for its trace.",
        "s", width=24,
    ).targets(_quantiles(TTFT_BUCKET, BY_MODEL, LLM,
                         "{{gen_ai_request_model}} ({{gen_ai_provider_name}})"))
    output = _timeseries(
        "Output tokens/s (mean per call)",
        "Output tokens per second of output generation (first to last token), streamed "
        "calls only.",
        "none",
    ).with_target(_query(_mean(OUTPUT_TPS, LLM),
                         "{{gen_ai_request_model}} ({{gen_ai_provider_name}})"))
    prefill = _timeseries(
        "Prefill tokens/s (mean per call)",
        "Input tokens per second of prefill (request sent to first token, less one round "
        "trip; server queueing included), streamed calls only.",
        "none",
    ).with_target(_query(_mean(PREFILL_TPS, LLM),
                         "{{gen_ai_request_model}} ({{gen_ai_provider_name}})"))
    errors = _timeseries(
        "LLM error ratio",
        "Share of LLM calls that ended with an error (error.type on "
        "gen_ai.client.operation.duration), by provider.",
        "percentunit",
    ).with_target(_query(
        f'(sum by (gen_ai_provider_name) (rate({LLM_CALLS}{{{LLM}, error_type!=""}}[{RATE}]))\n'
        f"or sum by (gen_ai_provider_name) (rate({LLM_CALLS}{{{LLM}}}[{RATE}])) * 0)\n"
        f"/ sum by (gen_ai_provider_name) (rate({LLM_CALLS}{{{LLM}}}[{RATE}]))",
        "{{gen_ai_provider_name}}"))
    calls = _timeseries(
        "LLM calls per second",
        "LLM calls per second by model and provider, failed ones included.", "reqps",
    ).with_target(_query(
        f"sum by ({BY_MODEL}) (rate({LLM_CALLS}{{{LLM}}}[{RATE}]))",
        "{{gen_ai_request_model}} ({{gen_ai_provider_name}})"))
    return [ttft, output, prefill, errors, calls]


def network_panels() -> list:
    """Network overhead: its share of task time and the connections tasks open."""
    share = _timeseries(
        "Network overhead share of task time",
        "DNS, connect, TLS, upload, one round trip per call and stream tails, as a share "
        "of all tasks' wall time.",
        "percentunit",
    ).with_target(_query(
        f"sum(rate(agent_latency_task_duration_seconds_sum"
        f'{{{SERVICE}, agent_latency_component="network_overhead"}}[{RATE}]))\n'
        f"/ sum(rate({TASK_SUM}[{RATE}]))", "network share"))
    connections = _timeseries(
        "New connections per task",
        "Mean TCP connections a task opened. More than one per task usually means a new "
        "client (no connection pool) per call.",
        "none",
    ).with_target(_query(
        f"sum(rate({NEW_CONNECTIONS}_sum{{{SERVICE}}}[{RATE}]))\n"
        f"/ sum(rate({NEW_CONNECTIONS}_count{{{SERVICE}}}[{RATE}]))", "connections per task"))
    return [share, connections]


def tool_panels() -> list:
    """Tool time by tool name."""
    busy = _timeseries(
        "Tool time by tool (seconds per second)",
        "Seconds spent in each tool per second of wall clock, summed over all running "
        "agents (outermost tool calls inside tasks).",
        "s", stacking=common.StackingMode.NORMAL, fill=60,
    ).with_target(_query(
        f"sum by (gen_ai_tool_name) (rate({TOOL}_sum{{{SERVICE}}}[{RATE}]))",
        "{{gen_ai_tool_name}}"))
    p95 = _timeseries(
        "Tool call duration p95 by tool",
        "95th percentile duration of one tool call, by tool. Points are exemplars.",
        "s",
    ).with_target(_query(
        "histogram_quantile(0.95, sum by (le, gen_ai_tool_name) "
        f"(rate({TOOL}_bucket{{{SERVICE}}}[{RATE}])))",
        "p95 {{gen_ai_tool_name}}", exemplar=True))
    return [busy, p95]


def overview() -> dashboard_b.Dashboard:
    """The one dashboard: tasks, LLM calls, network, tools."""
    board = (dashboard_b.Dashboard("agent-latency")
             .uid("agent-latency-overview")
             .description("Where coding agents' time goes: output generation, prefill, tool "
                          "execution, network overhead and other, from agent-latency's "
                          "metrics.")
             .tags(["agent-latency", "opentelemetry", "genai"])
             .time("now-1h", "now").refresh("30s").timezone("browser").readonly()
             .with_variable(_variable("service", "Service", "job"))
             .with_variable(_variable("provider", "Provider", "gen_ai_provider_name"))
             .with_variable(_variable("model", "Model", "gen_ai_request_model"))
             .link(dashboard_b.DashboardLink("Traces in Jaeger")
                   .type(dashboard_m.DashboardLinkType.LINK)
                   .url("http://127.0.0.1:16686/search").target_blank(True))
             .link(dashboard_b.DashboardLink("Traces in Tempo")
                   .type(dashboard_m.DashboardLinkType.LINK)
                   .url('/explore?left={"datasource":"tempo"}').target_blank(True)))
    for title, panels in (("Tasks", task_panels()), ("LLM calls", llm_panels()),
                          ("Network", network_panels()), ("Tools", tool_panels())):
        board = board.with_row(dashboard_b.Row(title))
        for panel in panels:
            board = board.with_panel(panel)
    return board


DASHBOARDS = {"agent-latency-overview.json": overview}


def render(builder: dashboard_b.Dashboard) -> str:
    """A dashboard as the JSON text committed under deploy/grafana/dashboards."""
    return json.dumps(builder.build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write every dashboard's JSON; ``--check`` only reports the ones that differ."""
    args = sys.argv[1:] if argv is None else argv
    stale = []
    for name, make in DASHBOARDS.items():
        path = OUT_DIR / name
        text = render(make())
        if "--check" in args:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for name in stale:
        print(f"{name} differs from generate.py's output: run python deploy/grafana/generate.py")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
