"""Every reader gives the percentiles the local file gives, for the same spans.

One run of tests/report/html_program.py (tasks, a nested task, LLM calls, nested and
parallel tools) writes the local file (the reference) and, from the same SDK spans through
OpenTelemetry's OTLP encoder, an OTLP/protobuf file, a Collector ``proto`` file and the
requests Jaeger's and Tempo's replayed APIs answer from (tests/backends/replay.py).
Phoenix is the real server, fed over OTLP by an agent in its network namespace; Jaeger is
the real one in tests/production/test_jaeger.py, so only Tempo is replayed here.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from replay import Backend, jaeger_trace, serve, spans_by_trace

from agent_latency import semconv
from agent_latency.budget import COMPONENTS
from agent_latency.report._backends import jaeger_spans
from agent_latency.report._read import TraceFileError
from agent_latency.report._sources import check_traces, load_source
from agent_latency.report._stats import summarize
from agent_latency.report._tasks import find_tasks

HERE = Path(__file__).parent
RECORDER = HERE / "record_formats.py"
SIM_RUNS = HERE.parent / "report" / "sim_runs.py"
# Jaeger and Phoenix keep whole microseconds: a task's start and end, and each span's, move
# by less than 1 µs each, so its figures by a few µs.
MICROSECOND_STORES = 5e-6


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "AGENT_LAT", "PHOENIX_"))}
    env[semconv.ENV_PROCESS_TASK] = "false"
    return env


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("formats")
    result = subprocess.run([sys.executable, str(RECORDER), str(directory)], cwd=directory,
                            env=_clean_env(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return directory


def percentiles(tasks) -> dict:
    """Per task name: count and p50/p95/p99/max/mean of wall time and each component."""
    names: dict[str, list] = {}
    for task in tasks:
        names.setdefault(task.name, []).append(task)
    return {name: {metric: summarize(values) for metric, values in [
        ("wall", [t.budget.wall for t in members]),
        *((c, [t.budget.shares[c] for t in members]) for c in COMPONENTS)]}
        for name, members in names.items()}


def assert_same_percentiles(got: dict, want: dict, abs_tol: float = 0.0) -> None:
    assert sorted(got) == sorted(want)
    for name in want:
        for metric, figures in want[name].items():
            for key, value in figures.items():
                assert got[name][metric][key] == pytest.approx(value, abs=abs_tol, rel=0), (
                    name, metric, key)


@pytest.fixture(scope="module")
def reference(recorded) -> dict:
    tasks, problems = load_source(recorded / ".agent-latency" / "traces.jsonl")
    assert problems == []
    assert sorted({t.name for t in tasks}) == ["fix-bug", "review"] and len(tasks) == 4
    return percentiles(tasks)


def _requests(recorded: Path) -> list[dict]:
    return json.loads((recorded / "requests.json").read_text())


class TestFiles:
    """OTLP/protobuf, the Collector's proto frames, one OTLP/JSON document, directories."""

    def test_otlp_protobuf_file(self, recorded, reference):
        tasks, problems = load_source(recorded / "otlp.pb")
        assert problems == []
        assert_same_percentiles(percentiles(tasks), reference)

    def test_collector_proto_file(self, recorded, reference):
        tasks, problems = load_source(recorded / "collector.pb")
        assert problems == []
        assert_same_percentiles(percentiles(tasks), reference)

    def test_forced_format_prefix(self, recorded, reference):
        tasks, _ = load_source(f"collector-proto:{recorded / 'collector.pb'}")
        assert_same_percentiles(percentiles(tasks), reference)
        with pytest.raises(TraceFileError):
            load_source(f"otlp-proto:{recorded / 'collector.pb'}")

    def test_truncated_collector_file_is_stated(self, recorded, reference, tmp_path):
        data = (recorded / "collector.pb").read_bytes()
        cut = tmp_path / "cut.pb"
        cut.write_bytes(data[:-10])
        _tasks, problems = load_source(cut)
        assert any("cut at" in p and "offset" in p for p in problems), problems

    def test_one_otlp_json_document(self, recorded, reference, tmp_path):
        lines = (recorded / ".agent-latency" / "traces.jsonl").read_text().splitlines()
        doc = {"resourceSpans": [rs for line in lines for rs in json.loads(line)["resourceSpans"]]}
        path = tmp_path / "export.json"
        path.write_text(json.dumps(doc, indent=2))
        tasks, problems = load_source(path)
        assert problems == []
        assert_same_percentiles(percentiles(tasks), reference)

    def test_directory_of_mixed_files(self, recorded, reference, tmp_path):
        # The same runs split over a JSON lines file and a proto file: one set of runs.
        lines = (recorded / ".agent-latency" / "traces.jsonl").read_text().splitlines()
        tasks_all, _ = load_source(recorded / ".agent-latency" / "traces.jsonl")
        (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
        shutil.copy(recorded / "collector.pb", tmp_path / "b.pb")
        tasks, problems = load_source(tmp_path)
        assert problems == []
        assert len(tasks) == 2 * len(tasks_all)


class TestJaeger:
    """Jaeger's model read span by span (the real Jaeger: tests/production/test_jaeger.py)."""

    def test_sixty_four_bit_ids_and_follows_from(self):
        trace = {"traceID": "1f", "processes": {"p1": {"serviceName": "a", "tags": []}},
                 "spans": [{"traceID": "1f", "spanID": "a1", "operationName": "x",
                            "references": [{"refType": "FOLLOWS_FROM", "traceID": "1f",
                                            "spanID": "b2"}],
                            "startTime": 10, "duration": 5, "processID": "p1",
                            "tags": [{"key": "n", "type": "int64", "value": "7"},
                                     {"key": "otel.status_code", "type": "string",
                                      "value": "ERROR"}]}]}
        [span] = jaeger_spans(trace, None)
        assert span.trace_id == "0" * 30 + "1f" and span.span_id == "0" * 14 + "a1"
        assert span.parent_id == "0" * 14 + "b2" and span.attributes["n"] == 7
        assert (span.start_ns, span.end_ns, span.status) == (10_000, 15_000, "ERROR")


class TestTempo:
    """tempo+http://…?q=… against Tempo's search and trace APIs (replayed)."""

    @pytest.mark.parametrize("style", ["batches", "resourceSpans"])
    def test_percentiles_equal_the_local_file(self, recorded, reference, style):
        backend = Backend("tempo", _requests(recorded), style)
        with serve(backend) as url:
            tasks, problems = load_source(f"tempo+{url}?q=%7B%7D&start=1&end=2")
        assert problems == []
        assert_same_percentiles(percentiles(tasks), reference)  # nanoseconds: exact
        assert backend.paths[0].startswith("/api/search?q=")
        assert len([p for p in backend.paths if p.startswith("/api/traces/")]) == 2

    def test_search_at_its_limit_is_stated(self, recorded):
        with serve(Backend("tempo", _requests(recorded))) as url:
            tasks, problems = load_source(f"tempo+{url}?q=%7B%7D&limit=1")
        assert len({t.span.trace_id for t in tasks}) == 1
        assert any("returned its limit of 1" in p for p in problems), problems


class TestTraceChecks:
    """Several services with skewed clocks, and a missing task span: stated, not dropped."""

    def _jaeger(self, recorded) -> tuple[str, dict]:
        trace_id, items = next(iter(spans_by_trace(_requests(recorded)).items()))
        return trace_id, jaeger_trace(trace_id, items)

    def test_clock_skew_between_services_is_corrected_and_stated(self, recorded):
        _trace_id, trace = self._jaeger(recorded)
        original = list(jaeger_spans(copy.deepcopy(trace), None))
        # The tool spans come from a second host whose clock is 200 ms ahead.
        trace["processes"]["p9"] = {"serviceName": "tool-host", "tags": []}
        for span in trace["spans"]:
            if span["operationName"].startswith("execute_tool"):
                span["processID"] = "p9"
                span["startTime"] += 200_000
        problems: list[str] = []
        [spans] = list(check_traces([list(jaeger_spans(trace, None))], problems))
        skewed = [p for p in problems if "clock skew" in p]
        assert skewed and all("'tool-host'" in p for p in skewed), problems
        by_id = {s.span_id: s for s in spans}
        before = {s.span_id: s for s in original}
        for span in spans:
            parent = by_id.get(span.parent_id)
            if span.service == "tool-host" and parent and parent.service != "tool-host":
                assert parent.start_ns <= span.start_ns and span.end_ns <= parent.end_ns
                # Moved, not stretched.
                old = before[span.span_id]
                assert span.end_ns - span.start_ns == old.end_ns - old.start_ns

    def test_missing_task_span_is_stated(self, recorded):
        trace_id, trace = self._jaeger(recorded)
        trace["spans"] = [s for s in trace["spans"]
                          if not s["operationName"].startswith("invoke_agent")]
        problems: list[str] = []
        [spans] = list(check_traces([list(jaeger_spans(trace, None))], problems))
        assert not problems
        tasks, [problem] = find_tasks(spans)
        assert not tasks
        assert trace_id in problem and "in no task" in problem and "task span is missing" \
            in problem


class TestPhoenix:
    """phoenix+http://…?project=… against a real Phoenix."""

    def test_percentiles_equal_the_local_file(self, phoenix, in_namespace, tmp_path):
        project = "readers"
        env = _clean_env()
        env.update({
            "OTEL_TRACES_EXPORTER": "otlp,jsonl", "OTEL_METRICS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:6006/v1/traces",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
            "PYTHONPATH": os.pathsep.join(sys.path),
        })
        result = in_namespace(phoenix, sys.executable, str(SIM_RUNS), "400", "5", "tools",
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]
        local, problems = load_source(tmp_path / ".agent-latency" / "traces.jsonl")
        assert problems == [] and len(local) == 5
        want = percentiles(local)
        reader = (
            "import json, sys\n"
            "from agent_latency.report._sources import TraceFileError, load_source\n"
            "try:\n"
            "    tasks, problems = load_source(sys.argv[1])\n"
            "except TraceFileError as exc:  # the project appears with its first span\n"
            "    tasks, problems = [], [str(exc)]\n"
            "print(json.dumps({'problems': problems, 'tasks': [\n"
            "    {'name': t.name, 'wall': t.budget.wall, 'shares': t.budget.shares}\n"
            "    for t in tasks]}))\n")
        deadline = time.monotonic() + 60
        while True:  # Phoenix ingests asynchronously
            got = in_namespace(phoenix, sys.executable, "-c", reader,
                               f"phoenix+http://127.0.0.1:6006?project={project}", env=env,
                               capture_output=True, text=True, timeout=60)
            assert got.returncode == 0, got.stderr[-3000:]
            doc = json.loads(got.stdout)
            if len(doc["tasks"]) >= 5 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert doc["problems"] == [], (doc["problems"], result.stderr[-2000:])

        class Task:
            def __init__(self, row):
                self.name = row["name"]
                self.budget = type("B", (), {"wall": row["wall"], "shares": row["shares"]})

        assert_same_percentiles(percentiles([Task(r) for r in doc["tasks"]]), want,
                                MICROSECOND_STORES)
