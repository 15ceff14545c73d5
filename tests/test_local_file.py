"""The local default's trace file (``_local.JsonLinesSpanExporter``): its encoding and the
promises of docs/reliability.md, "The local trace file and report"."""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState
from otlp_reference import protobuf_otlp_json

from agent_latency import _log, semconv
from agent_latency._local import (
    ENV_MAX_FILE_MB,
    JsonLinesSpanExporter,
    default_traces_path,
    spans_to_otlp_json,
)
from agent_latency._otlp_json import encode_line
from agent_latency.report import load_tasks, read_spans


class _Keep(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _provider(resource: Resource | None = None, **limits) -> tuple[TracerProvider, _Keep]:
    keep = _Keep()
    provider = TracerProvider(resource=resource or Resource.create({"service.name": "t"}),
                              span_limits=SpanLimits(**limits) if limits else None)
    provider.add_span_processor(keep)
    return provider, keep


def _spans(count: int, name: str = "s", size: int = 0) -> list[ReadableSpan]:
    provider, keep = _provider()
    tracer = provider.get_tracer("test")
    for i in range(count):
        with tracer.start_as_current_span(f"{name}-{i}", attributes={"pad": "x" * size}):
            pass
    return keep.spans


def _lines(path: Path) -> list[dict]:
    """Every line of the file, parsed: fails on any line that is not whole JSON (a blank
    one included)."""
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _names(path: Path) -> list[str]:
    return [s.name for s in read_spans(path).spans]


def _varied_spans() -> list[ReadableSpan]:
    """Spans of every shape the encoder meets: all attribute types, events, links, status,
    kinds, dropped counts, remote parents, trace state, two resources and scopes."""
    out: list[ReadableSpan] = []
    resource_a = Resource({"service.name": "agent", "process.pid": 4242,
                           "host.arch": "x86_64", "deployment.weight": 0.5,
                           "feature.on": True, "tags": ("a", "b")}, schema_url="https://s/1")
    resource_b = Resource({"service.name": "other"})
    remote = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7,
                         is_remote=True, trace_flags=TraceFlags(1),
                         trace_state=TraceState([("vendor", "v1"), ("k", "x")]))
    local_link = SpanContext(0x1, 0x2, is_remote=False)
    for resource in (resource_a, resource_b):
        provider, keep = _provider(resource, max_attributes=12, max_events=2, max_links=1)
        for scope in (("agent_latency", "1.2.3", "https://scope"), ("other.lib", None, None)):
            tracer = provider.get_tracer(scope[0], scope[1], schema_url=scope[2])
            for kind in SpanKind:
                attributes = {
                    "str": "héllo \u2603 \"quoted\" \\ \n", "empty": "", "int": -7,
                    "zero": 0, "big": (1 << 63) - 1, "float": 1.5, "whole": 2.0,
                    "nan": math.nan, "inf": -math.inf, "bool": False,
                    "strs": ("a", ""), "ints": (1, 2, 3),
                }
                if kind is SpanKind.CLIENT:
                    attributes.update({"floats": (0.1, 1e300), "bools": (True, False),
                                       "none_yet": (), "dropped": "over the limit"})
                context = None
                if kind is SpanKind.SERVER:
                    from opentelemetry import trace

                    context = trace.set_span_in_context(trace.NonRecordingSpan(remote))
                span = tracer.start_span(
                    f"op {kind.name}", context=context, kind=kind, attributes=attributes,
                    links=[Link(remote, {"l": 1}), Link(local_link)]
                    if kind is SpanKind.PRODUCER else [],
                    start_time=1_700_000_000_000_000_000 + kind.value)
                if kind is not SpanKind.INTERNAL:
                    span.add_event("first", {"n": 1, "s": "x"}, timestamp=1_700_000_000_1)
                    span.add_event("second")
                    span.add_event("third: over the limit")
                if kind is SpanKind.CLIENT:
                    span.set_status(Status(StatusCode.ERROR, "boom"))
                elif kind is SpanKind.CONSUMER:
                    span.set_status(Status(StatusCode.OK))
                span.end(end_time=1_700_000_001_000_000_000)
        out.extend(keep.spans)
    # A span with no attributes and no name.
    provider, keep = _provider(resource_a)
    provider.get_tracer("agent_latency", "1.2.3", schema_url="https://scope").start_span(
        "").end()
    out.extend(keep.spans)
    return out


class TestDirectEncoder:
    """The direct OTLP/JSON encoder writes what the protobuf path wrote, and report reads it."""

    def test_equal_to_the_protobuf_path(self):
        spans = _varied_spans()
        assert any(s.dropped_attributes for s in spans)
        assert any(s.dropped_events for s in spans) and any(s.dropped_links for s in spans)
        direct = json.loads(encode_line(spans))
        reference = json.loads(json.dumps(protobuf_otlp_json(spans, integer_enums=True)))
        assert direct == reference
        assert len(direct["resourceSpans"]) == 2
        assert spans_to_otlp_json(spans) == reference

    def test_equal_one_span_at_a_time(self):
        for span in _varied_spans():
            assert json.loads(encode_line([span])) == json.loads(
                json.dumps(protobuf_otlp_json([span], integer_enums=True)))

    def test_one_ascii_line(self):
        line = encode_line(_varied_spans())
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        line.decode("ascii")

    def test_report_reads_it(self, tmp_path):
        path = tmp_path / "traces.jsonl"
        exporter = JsonLinesSpanExporter(path)
        exporter.export(_varied_spans())
        exporter.shutdown()
        spans = read_spans(path)
        assert spans.problems == []
        client = next(s for s in spans.spans if s.name == "op CLIENT")
        assert client.status == "ERROR"
        assert client.attributes["floats"] == [0.1, 1e300]
        server = next(s for s in spans.spans if s.name == "op SERVER")
        assert server.parent_id == "00f067aa0ba902b7"
        attrs = server.attributes
        assert attrs["int"] == -7 and attrs["big"] == (1 << 63) - 1
        assert attrs["str"] == "héllo \u2603 \"quoted\" \\ \n"
        assert attrs["ints"] == [1, 2, 3] and attrs["bool"] is False
        assert math.isnan(attrs["nan"]) and attrs["inf"] == -math.inf

    def test_unencodable_text_does_not_raise(self, tmp_path):
        provider, keep = _provider()
        with provider.get_tracer("t").start_as_current_span("s") as span:
            span.set_attribute("argv", "caf\udce9")  # a surrogate-escaped command line
        exporter = JsonLinesSpanExporter(tmp_path / "t.jsonl")
        assert exporter.export(keep.spans).name == "SUCCESS"
        assert read_spans(tmp_path / "t.jsonl").spans[0].attributes["argv"] == "caf\udce9"


class TestFork:
    """A forked child writes its own spans and exits, even when the parent was mid-export."""

    @staticmethod
    def _busy_parent(path: Path):
        exporter = JsonLinesSpanExporter(path)
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=1))
        tracer = provider.get_tracer("t")
        stop = threading.Event()
        batch = _spans(50, "parent")

        def exporting():  # a concurrent export and force_flush, all the time
            while not stop.is_set():
                exporter.export(batch)
                with tracer.start_as_current_span("parent-flushed"):
                    pass
                provider.force_flush()

        thread = threading.Thread(target=exporting, daemon=True)
        thread.start()
        return exporter, provider, tracer, stop, thread

    @staticmethod
    def _child_work(provider: TracerProvider, tracer, i: int) -> None:
        with tracer.start_as_current_span(f"child-{i}"):
            pass
        # Generous: on a loaded machine the child's fresh batch worker may start late; a
        # child whose export is stuck on the parent's lock still never gets there.
        if not provider.force_flush(30_000):
            os._exit(3)

    @staticmethod
    def _fork_while_locked(exporter: JsonLinesSpanExporter, fork):
        # An export caught mid-write by the fork: its lock is held by a thread the child
        # will not have.
        locked, release = threading.Event(), threading.Event()

        def hold():
            with exporter._lock:
                locked.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        locked.wait(10)
        try:
            return fork()
        finally:
            release.set()
            holder.join()

    def test_os_fork(self, tmp_path):
        path = tmp_path / "traces.jsonl"
        exporter, provider, tracer, stop, thread = self._busy_parent(path)
        try:
            for i in range(20):
                pid = self._fork_while_locked(exporter, os.fork)
                if pid == 0:
                    try:
                        self._child_work(provider, tracer, i)
                    finally:
                        os._exit(0)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        assert os.waitstatus_to_exitcode(status) == 0
                        break
                    time.sleep(0.01)
                else:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    pytest.fail(f"fork {i}: the child hung")
        finally:
            stop.set()
            thread.join()
            provider.shutdown()
        names = set(_names(path))
        assert {f"child-{i}" for i in range(20)} <= names
        _lines(path)

    def test_multiprocessing_fork(self, tmp_path):
        path = tmp_path / "traces.jsonl"
        exporter, provider, tracer, stop, thread = self._busy_parent(path)
        context = multiprocessing.get_context("fork")
        try:
            for i in range(20):
                process = context.Process(target=self._child_work, args=(provider, tracer, i))
                self._fork_while_locked(exporter, process.start)
                process.join(60)
                if process.exitcode is None:
                    process.kill()
                    process.join()
                    pytest.fail(f"fork {i}: the child hung")
                assert process.exitcode == 0
        finally:
            stop.set()
            thread.join()
            provider.shutdown()
        assert {f"child-{i}" for i in range(20)} <= set(_names(path))


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs, unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    directory = tmp_path / "disk"
    directory.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                              str(directory)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", str(directory)], check=False)


class TestFullDisk:
    """A full disk leaves whole lines only, one warning, and later writes start clean."""

    def test_fill_export_free_export(self, small_disk, caplog):
        path = small_disk / "traces.jsonl"
        exporter = JsonLinesSpanExporter(path)
        assert exporter.export(_spans(3, "before")).name == "SUCCESS"
        filler = small_disk / "filler"
        with open(filler, "wb") as f:  # leave less than the next batch needs
            free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
            f.write(b"\0" * max(0, free - 2048))
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            assert exporter.export(_spans(20, "lost", size=400)).name == "FAILURE"
            assert exporter.export(_spans(20, "lost-again", size=400)).name == "FAILURE"
            filler.unlink()
            assert exporter.export(_spans(3, "after")).name == "SUCCESS"
        exporter.shutdown()
        lines = _lines(path)  # every line parses
        assert len(lines) == 2
        assert _names(path) == ["before-0", "before-1", "before-2",
                                "after-0", "after-1", "after-2"]
        warnings = [r for r in caplog.records if r.name == "agent_latency"]
        assert len(warnings) == 1 and "cannot write spans" in warnings[0].getMessage()

    def test_a_line_being_written_is_not_taken_for_a_torn_one(self, tmp_path):
        """Processes appending long lines while others open the file: the end of a line
        still being written (the file's size grows page by page) once made a new writer
        start with a newline, a blank line in the file."""
        path = tmp_path / "traces.jsonl"
        big = encode_line(_spans(1, "big", size=4_000_000))
        small = encode_line(_spans(1, "small"))
        stop = time.monotonic() + 3.0

        def append(line: bytes, pause: float) -> None:
            """Open the file afresh, append ``line``, close; again until ``stop``."""
            while time.monotonic() < stop:
                exporter = JsonLinesSpanExporter(path, max_bytes=10**12)
                exporter._write(line)
                exporter.shutdown()
                time.sleep(pause)

        context = multiprocessing.get_context("fork")
        processes = [context.Process(target=append, args=args)
                     for args in ((big, 0.005), (big, 0.005), (small, 0.001))]
        for process in processes:
            process.start()
        for process in processes:
            process.join(30)
        lines = path.read_bytes().splitlines()
        assert len(lines) > 10
        assert b"" not in lines, f"{lines.count(b'')} blank lines of {len(lines)}"
        assert len(_lines(path)) == len(lines)

    def test_torn_line_left_by_another_writer_is_not_glued_to(self, tmp_path):
        path = tmp_path / "traces.jsonl"
        path.write_bytes(b'{"resourceSpans":[{"scopeSp')  # a crash mid-line, say
        exporter = JsonLinesSpanExporter(path)
        exporter.export(_spans(2, "good"))
        result = read_spans(path)
        assert [s.name for s in result.spans] == ["good-0", "good-1"]
        assert len(result.problems) == 1 and ":1: malformed JSON" in result.problems[0]


class TestFileReplaced:
    """A trace file deleted or replaced while the program runs gets the later spans."""

    def test_deleted(self, tmp_path):
        path = tmp_path / "d" / "traces.jsonl"
        exporter = JsonLinesSpanExporter(path)
        exporter.export(_spans(1, "first"))
        path.unlink()
        exporter.export(_spans(1, "second"))
        assert _names(path) == ["second-0"]

    def test_directory_deleted(self, tmp_path):
        path = tmp_path / "d" / "traces.jsonl"
        exporter = JsonLinesSpanExporter(path)
        exporter.export(_spans(1, "first"))
        shutil.rmtree(path.parent)
        exporter.export(_spans(1, "second"))
        assert _names(path) == ["second-0"]

    def test_replaced(self, tmp_path):
        path = tmp_path / "traces.jsonl"
        exporter = JsonLinesSpanExporter(path)
        exporter.export(_spans(1, "first"))
        other = tmp_path / "new"
        other.write_text("")
        os.replace(other, path)
        exporter.export(_spans(1, "second"))
        assert _names(path) == ["second-0"]


class TestWhereTheFileGoes:
    """The directory is fixed at instrument() time; an empty AGENT_LATENCY_DIR is the
    default."""

    def test_relative_path_is_made_absolute_at_construction(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        exporter = JsonLinesSpanExporter(Path("out/traces.jsonl"))
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        exporter.export(_spans(1))
        assert exporter.path == tmp_path / "out" / "traces.jsonl"
        assert (tmp_path / "out" / "traces.jsonl").exists()
        assert not (elsewhere / "out").exists()

    def test_empty_dir_variable_is_the_default(self, tmp_path, monkeypatch, caplog):
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv(semconv.ENV_OUTPUT_DIR, "")
        _log._said.discard("env-dir-empty")  # said once per process: say it here
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            path = default_traces_path()
        assert path == tmp_path / ".agent-latency" / "traces.jsonl"
        assert any(semconv.ENV_OUTPUT_DIR in r.getMessage() for r in caplog.records)

    def test_chdir_after_instrument(self, tmp_path):
        program = textwrap.dedent("""
            import os, agent_latency
            agent_latency.instrument()
            os.mkdir("repo")
            os.chdir("repo")
            with agent_latency.task("t"):
                with agent_latency.tool("x"):
                    pass
        """)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
        result = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert not (tmp_path / "repo" / ".agent-latency").exists()
        tasks, _ = load_tasks(tmp_path / ".agent-latency" / "traces.jsonl")
        assert "t" in [t.name for t in tasks]


class TestRotation:
    """The file is rotated at its size cap, keeping a fixed number of old files."""

    def test_rotates_at_the_cap(self, tmp_path):
        path = tmp_path / "traces.jsonl"
        exporter = JsonLinesSpanExporter(path, max_bytes=4000, rotated_files=2)
        batch = len(encode_line(_spans(3)))
        for i in range(40):
            exporter.export(_spans(3, f"b{i}"))
        files = sorted(p.name for p in tmp_path.iterdir())
        # (no current file when the last export rotated it: the next one makes it)
        assert files in (["traces.jsonl", "traces.jsonl.1", "traces.jsonl.2"],
                         ["traces.jsonl.1", "traces.jsonl.2"])
        for name in files:
            size = (tmp_path / name).stat().st_size
            assert size < 4000 + batch
            _lines(tmp_path / name)
        # The newest spans are kept, in order, across the rotated files.
        oldest_first = sorted(files, key=lambda n: -int(n[-1]) if n[-1].isdigit() else 0)
        names = [n for name in oldest_first for n in _names(tmp_path / name)]
        assert len(names) > 4000 // batch * 3 * 2
        assert names == [f"b{i}-{j}" for i in range(40 - len(names) // 3, 40) for j in range(3)]

    def test_cap_from_the_environment(self, tmp_path, monkeypatch):
        monkeypatch.setenv(ENV_MAX_FILE_MB, "0.002")
        path = tmp_path / "traces.jsonl"
        exporter = JsonLinesSpanExporter(path)
        for _ in range(10):
            exporter.export(_spans(3))
        rotated = tmp_path / "traces.jsonl.1"
        assert rotated.exists()
        assert 2000 <= rotated.stat().st_size < 2000 + len(encode_line(_spans(3)))

    def test_report_reads_the_rotated_files_as_one(self, tmp_path):
        provider, keep = _provider()
        tracer = provider.get_tracer("t")
        with tracer.start_as_current_span("task", attributes={semconv.TASK_NAME: "fix"}):
            for i in range(6):
                with tracer.start_as_current_span(f"tool-{i}", attributes={
                        semconv.COMPONENT: semconv.TOOL_EXECUTION}):
                    pass
        # The task's spans, split over two files by a rotation.
        first, second = keep.spans[:4], keep.spans[4:]
        path = tmp_path / "traces.jsonl"
        exporter = JsonLinesSpanExporter(path, max_bytes=len(encode_line(first)))
        exporter.export(first)
        exporter.export(second)
        assert (tmp_path / "traces.jsonl.1").exists() and path.exists()
        tasks, problems = load_tasks(path, rotated=True)
        assert problems == []
        assert [t.name for t in tasks] == ["fix"]
        assert tasks[0].budget.counts["tool_calls"] == 6
        current_only, _ = load_tasks(path)
        assert current_only[0].budget.counts["tool_calls"] == 2
