"""Reading a stream in parts, one process each (report/_parallel.py), gives what one
process gives."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_cli import BASE, SECOND, _llm_attrs, _span

from agent_latency import _log, semconv
from agent_latency.report import BadInput, TraceFileError, summarize_sources
from agent_latency.report import _load as report_load
from agent_latency.report import _parallel as parallel
from agent_latency.report._cli import Progress
from agent_latency.report._summary import task_json

WORKERS = parallel.WORKERS_ENV


def _trace(t: int) -> list[dict]:
    """Trace ``t``: a task (``fix`` or ``review``; every fifth with a nested task), two LLM
    calls on two models and two tools; every third trace starts at the same time as the
    one before (ties in the order of tasks and of the slowest lists)."""
    start = BASE + (t - t % 3) * 60 * SECOND
    llm_s, tool_s = 0.3 + 0.01 * (t % 7), 0.1 * (t % 4 + 1)
    spans, at = [], start
    for n in range(2):
        end = at + round(llm_s * SECOND)
        spans.append(_span(t, 10 + n, 1, "chat", _llm_attrs(f"m-{'ab'[n]}", llm_s, 0.1,
                                                             50 * (t % 5 + 1)), at, end))
        tool_end = end + round(tool_s * SECOND)
        spans.append(_span(t, 20 + n, 2 if t % 5 == 0 else 1, f"execute_tool t{n}", {
            semconv.COMPONENT: semconv.TOOL_EXECUTION, semconv.GEN_AI_TOOL_NAME: f"t{n}"},
            end, tool_end))
        at = tool_end
    if t % 5 == 0:
        spans.append(_span(t, 2, 1, "inner", {semconv.TASK_NAME: "inner"}, start, at))
    spans.append(_span(t, 1, None, "task", {semconv.TASK_NAME: "fix" if t % 2 else "review"},
                       start, at + SECOND // 100))
    return spans


def _line(spans: list[dict], service: str = "svc") -> str:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": service}}]},
        "scopeSpans": [{"spans": spans}]}]}) + "\n"


def write_stream(paths: list[Path], traces: int, *, malformed: tuple[int, ...] = (),
                 orphan: int | None = None) -> None:
    """``traces`` traces, each over three lines, each line holding two traces' batches (so
    every cut between parts falls inside a trace), spread over ``paths`` as rotated files
    are; lines numbered in ``malformed`` are not JSON; trace ``orphan`` has no task span."""
    lines: list[str] = []
    previous: list[dict] = []
    for t in range(1, traces + 1):
        spans = _trace(t)
        if t == orphan:
            spans = [s for s in spans if s["name"] != "task"]
        third = len(spans) // 3
        lines.append(_line(previous + spans[:third]))
        lines.append(_line(spans[third:2 * third]))
        previous = spans[2 * third:]
    lines.append(_line(previous))
    for number in malformed:
        lines[number] = '{"resourceSpans": [ not json\n'
    share = -(-len(lines) // len(paths))
    for k, path in enumerate(paths):
        path.write_text("".join(lines[k * share:(k + 1) * share]))


def _read(paths: list[Path], workers: int, monkeypatch: pytest.MonkeyPatch,
          **options) -> tuple[dict, list[str], list[str]]:
    monkeypatch.setenv(WORKERS, str(workers))
    summary, problems, notes = summarize_sources(paths, keep_tasks=True, **options)
    doc = {"summary": summary.to_json(), "tasks": [task_json(t) for t in summary.tasks],
           "first": summary.first_start_ns, "last": summary.last_end_ns}
    return doc, problems, notes


@pytest.fixture(autouse=True)
def no_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads here in parts even when earlier tests in this process left idle threads
    behind (exporters' batch threads, servers): the workers only read files, so those
    threads' locks are never needed in them.  ``TestWhenInParts`` tests the check itself."""
    monkeypatch.setattr(parallel, "_other_threads", lambda: False)


@pytest.fixture
def in_parts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the reads done in parts (so a test knows it did not fall back)."""
    calls: list[int] = []
    real = report_load.summarize_in_parts

    def spy(paths, workers, *args, **kwargs):
        calls.append(workers)
        return real(paths, workers, *args, **kwargs)

    monkeypatch.setattr(report_load, "summarize_in_parts", spy)
    return calls


class TestSameResult:
    """Summary, tasks, problems and notes equal those of one process."""

    @pytest.mark.parametrize("workers", [2, 3, 7])
    def test_rotated_stream_with_bad_lines_and_a_missing_task(self, tmp_path, monkeypatch,
                                                              in_parts, workers):
        paths = [tmp_path / "traces.jsonl.1", tmp_path / "traces.jsonl"]
        write_stream(paths, 60, malformed=(17, 95), orphan=33)
        one, problems_one, notes_one = _read(paths, 1, monkeypatch)
        assert not in_parts
        many, problems_many, notes_many = _read(paths, workers, monkeypatch)
        assert in_parts == [workers]
        assert one["summary"]["all"]["count"] > 40
        assert many == one
        # Line order, file names and line numbers as one process words them.
        assert problems_many == problems_one and len(problems_one) == 2
        assert "traces.jsonl.1:18: malformed JSON" in problems_one[0]
        assert sorted(notes_many) == sorted(notes_one)
        assert any("in no task" in n for n in notes_one)

    def test_filters_apply_in_every_part(self, tmp_path, monkeypatch, in_parts):
        path = tmp_path / "t.jsonl"
        write_stream([path], 40)

        def only_review(task) -> bool:
            return task.name == "review"

        one = _read([path], 1, monkeypatch, selection=only_review)[0]
        many = _read([path], 4, monkeypatch, selection=only_review)[0]
        assert in_parts == [4]
        assert many == one and set(one["summary"]["by_name"]) == {"review"}

    def test_the_cli_prints_the_same(self, tmp_path):
        path = tmp_path / "t.jsonl"
        write_stream([path], 50, malformed=(3,))
        outputs = []
        for workers in ("1", "3"):
            for args in (["--json"], ["--tasks"]):
                result = subprocess.run(
                    [sys.executable, "-m", "agent_latency", "report", *args, str(path)],
                    capture_output=True, text=True, timeout=120,
                    env={**os.environ, WORKERS: workers})
                assert result.returncode == 2, result.stderr  # the malformed line
                outputs.append((result.stdout, result.stderr))
        assert outputs[:2] == outputs[2:]


class TestBadInput:
    """Bad input ends a read in parts as it ends one process's."""

    def test_without_keep_going_the_first_problem_is_raised(self, tmp_path, monkeypatch):
        path = tmp_path / "t.jsonl"
        write_stream([path], 40, malformed=(70, 20))
        messages = []
        for workers in (1, 3):
            monkeypatch.setenv(WORKERS, str(workers))
            with pytest.raises(BadInput) as caught:
                summarize_sources([path], keep_going=False)
            messages.append(str(caught.value))
        assert messages[0] == messages[1] and ":21: malformed JSON" in messages[0]

    def test_nothing_readable_is_one_error(self, tmp_path, monkeypatch):
        path = tmp_path / "t.jsonl"
        path.write_text('{"resourceSpans": 1}\n' * 50 + "{not json\n" * 50)
        messages = []
        for workers in (1, 2):
            monkeypatch.setenv(WORKERS, str(workers))
            with pytest.raises(TraceFileError) as caught:
                summarize_sources([path])
            messages.append(str(caught.value))
        assert messages[0] == messages[1] and "no OTLP/JSON spans found" in messages[0]


class TestWhenInParts:
    """Parts only where they are safe and pay; one process otherwise."""

    def test_large_files_use_each_cpu(self, tmp_path, monkeypatch):
        path = tmp_path / "t.jsonl"
        write_stream([path], 5)
        monkeypatch.delenv(WORKERS, raising=False)
        monkeypatch.setattr(parallel, "_cpus", lambda: 12)
        size = path.stat().st_size
        assert parallel.workers_for([path], size) == 1  # below MIN_BYTES
        monkeypatch.setattr(parallel, "MIN_BYTES", size)
        assert parallel.workers_for([path], size) == parallel.MAX_WORKERS

    def test_one_process_for_other_sources(self, tmp_path, monkeypatch):
        monkeypatch.setenv(WORKERS, "4")
        lines = tmp_path / "t.jsonl"
        write_stream([lines], 5)
        pretty = tmp_path / "doc.json"
        pretty.write_text(json.dumps(json.loads(lines.read_text().splitlines()[0]), indent=2))
        protobuf = tmp_path / "t.pb"
        protobuf.write_bytes(b"\x0a\x00")
        assert parallel.workers_for([lines], 1) == 4
        for paths in ([pretty], [lines, protobuf], ["jaeger+http://localhost:1?service=a"],
                      [tmp_path / "missing.jsonl"]):
            assert parallel.workers_for(paths, 1) == 1, paths

    def test_one_process_while_other_threads_run(self, tmp_path, monkeypatch):
        """A fork copies locks other threads may hold: never fork then."""
        monkeypatch.undo()  # the real check, not no_other_threads'
        monkeypatch.setenv(WORKERS, "4")
        path = tmp_path / "t.jsonl"
        write_stream([path], 5)
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait)
        thread.start()
        try:
            assert parallel.workers_for([path], 1) == 1
        finally:
            stop.set()
            thread.join()

    @pytest.mark.parametrize("value", ["abc", "-3", "nan", "1e9"])
    def test_a_bad_setting_keeps_the_default(self, tmp_path, monkeypatch, caplog, value):
        monkeypatch.setattr(_log, "_said", set())
        monkeypatch.setenv(WORKERS, value)
        path = tmp_path / "t.jsonl"
        write_stream([path], 5)
        assert parallel.workers_for([path], 1) == 1  # the default: by size
        assert WORKERS in caplog.text


class TestProgress:
    """The progress bar sees every byte of both passes, from the workers too."""

    @pytest.mark.parametrize("workers", [1, 3])
    def test_both_passes_are_counted(self, tmp_path, monkeypatch, workers):
        path = tmp_path / "t.jsonl"
        write_stream([path], 30)
        fed: list[int] = []

        class Counting(Progress):
            __slots__ = ()

            def add(self, size: int) -> None:
                fed.append(size)

        monkeypatch.setenv(WORKERS, str(workers))
        summarize_sources([path], progress=Counting(path.stat().st_size, enabled=True))
        assert sum(fed) == 2 * path.stat().st_size


class TestWorkerFailure:
    """A worker that dies or fails costs time, never the report; Ctrl-C stops them all."""

    def _dying(self, monkeypatch, how):
        real = parallel._summarize_part

        def part(number: int):
            if number == 1:
                how()
            return real(number)

        # Workers are forked: they run the patched function.
        monkeypatch.setattr(parallel, "_summarize_part", part)

    @pytest.mark.parametrize(("how", "said"), [
        (lambda: os.kill(os.getpid(), signal.SIGKILL), "worker 1 ended with exit status -9"),
        (lambda: 1 / 0, "ZeroDivisionError: division by zero"),
    ], ids=["killed", "fault"])
    def test_read_again_in_one_process(self, tmp_path, monkeypatch, how, said):
        path = tmp_path / "t.jsonl"
        write_stream([path], 40, malformed=(7,))
        one, problems_one, notes_one = _read([path], 1, monkeypatch)
        self._dying(monkeypatch, how)
        doc, problems, notes = _read([path], 3, monkeypatch)
        assert doc == one and problems == problems_one
        assert notes == [f"reading in parts failed: {said}; read again in one process",
                         *notes_one]
        assert multiprocessing.active_children() == []

    def test_ctrl_c_stops_every_worker(self, tmp_path, monkeypatch):
        path = tmp_path / "t.jsonl"
        write_stream([path], 40)

        class Interrupted(Progress):
            __slots__ = ()

            def add(self, size: int) -> None:
                raise KeyboardInterrupt

        monkeypatch.setenv(WORKERS, "3")
        with pytest.raises(KeyboardInterrupt):
            summarize_sources([path], progress=Interrupted(path.stat().st_size, enabled=True))
        assert multiprocessing.active_children() == []
