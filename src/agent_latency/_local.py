"""The embedded local default: spans as OTLP-JSON lines in a file, a line per finished task.

Used when the program set no tracer provider and no OTLP endpoint is configured, so a user
sees budgets with no backend at all.  The file has one OTLP/JSON ``ExportTraceServiceRequest``
per line (the OpenTelemetry Collector's file exporter format), readable by
``agent-latency report``.

The file's promises (docs/reliability.md, "The local trace file and report"): whole lines
only, even on a full disk; a file deleted or replaced while the program runs is made again;
a forked child writes its own spans; the file is rotated at a size cap; the directory is
fixed when ``instrument()`` runs, whatever the program's working directory is later.
"""

from __future__ import annotations

import errno
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import semconv
from ._console import ConsoleLines, shown_name
from ._env import env_number
from ._log import internal_error, warn_once
from ._otlp_json import encode_line, encode_request
from ._process import process_task
from .budget import COMPONENTS, SPLIT_COUNTS, Budget
from .codec import adopt_other_parts

try:
    import fcntl
except ImportError:  # not on Windows: no lock, the file's end read as it is
    fcntl = None  # type: ignore[assignment]

ENV_MAX_FILE_MB = "AGENT_LATENCY_MAX_FILE_MB"
"""Size in MB (10^6 bytes) at which ``traces.jsonl`` is rotated (default 100)."""
DEFAULT_MAX_FILE_MB = 100.0
ROTATED_FILES = 3
"""Rotated files kept beside the current one: ``traces.jsonl.1`` (newest) … ``.3``."""
DEFAULT_DIR = ".agent-latency"
TRACES_FILE = "traces.jsonl"
DEMO_SUBDIR = "demo"
"""The demo's directory inside the local default's (``AGENT_LATENCY_DIR``): the report falls
back on it when the program's own traces file does not exist yet (``report/_files.py``). It lives
here, not in ``_demo``, because the demo imports the report."""


def default_traces_path() -> Path:
    """``$AGENT_LATENCY_DIR/traces.jsonl`` (default ``.agent-latency``), made absolute now.

    Resolved once, when ``instrument()`` builds the exporter: a program that changes its
    working directory later still writes where it started.  An empty ``AGENT_LATENCY_DIR``
    means the default (with one warning), not the current directory.
    """
    directory = os.environ.get(semconv.ENV_OUTPUT_DIR)
    if directory is not None and not directory.strip():
        warn_once("env-dir-empty", "agent-latency: %s is empty; using %s",
                  semconv.ENV_OUTPUT_DIR, DEFAULT_DIR)
        directory = None
    return (Path(directory or DEFAULT_DIR) / TRACES_FILE).absolute()


# Every exporter alive in this process, for the fork hook; weak, so the hook keeps none alive.
_live_exporters: weakref.WeakSet[JsonLinesSpanExporter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for exporter in list(_live_exporters):
        exporter._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class JsonLinesSpanExporter(SpanExporter):
    """Appends spans to a file as OTLP/JSON, one export request per line.

    A file that cannot be written (a missing directory that cannot be made, a full disk)
    is reported once and the spans are dropped: the host program goes on.  What a failed
    write left of its line is cut off again, so every line in the file stays whole.  Before
    each write the file at ``path`` is checked to be the one open (same inode): deleted or
    replaced, it is opened again.  Past ``max_bytes`` it is rotated to ``path.1`` … (keeping
    ``rotated_files``).  In a forked child the exporter gets a new lock and its own file
    descriptor, so a lock held by a parent thread at the fork cannot hang the child.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int | None = None,
                 rotated_files: int = ROTATED_FILES) -> None:
        # Absolute now: a relative path would follow the program's later chdir.
        self._path = Path(path).absolute()
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._max_bytes = max_bytes if max_bytes is not None else int(
            env_number(ENV_MAX_FILE_MB, DEFAULT_MAX_FILE_MB) * 1_000_000)
        self._rotated_files = max(0, rotated_files)
        _live_exporters.add(self)

    @property
    def path(self) -> Path:
        """Where the spans go."""
        return self._path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            data = encode_line(spans)
        except Exception:  # noqa: BLE001 - a span we cannot encode must not stop the program
            internal_error("jsonl.encode")
            return SpanExportResult.FAILURE
        with self._lock:
            return self._write(data)

    def _write(self, data: bytes) -> SpanExportResult:
        fd, locked, written, start = None, False, 0, 0
        try:
            fd = self._open_current()
            locked = _lock(fd)
            if locked and not self._is_current(fd):  # rotated or replaced meanwhile
                _unlock(fd)
                fd = self._open_current()
                locked = _lock(fd)
            # The file's end, read under the lock every writer of ours takes: a line left
            # torn (a writer killed mid-write) gets no line glued to it.  Without the lock
            # it is not read: the end of another process's line still being written looks
            # torn (the file grows page by page), and a newline then made a blank line.
            start = os.fstat(fd).st_size
            if locked and start and _last_byte(fd, start) != b"\n":
                data = b"\n" + data
            # One write on an O_APPEND descriptor: lines from several processes sharing
            # the file never interleave.
            while written < len(data):
                count = os.write(fd, data[written:] if written else data)
                if count <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += count
            if start + written >= self._max_bytes:
                self._rotate(fd)
            return SpanExportResult.SUCCESS
        except Exception as exc:  # noqa: BLE001
            if fd is not None and written:
                self._cut_partial_line(fd, start, written)
            warn_once(f"jsonl-{self._path}", "agent-latency: cannot write spans to %s: %s",
                      self._path, exc)
            return SpanExportResult.FAILURE
        finally:
            if locked and fd is not None and self._fd == fd:  # (a rotation closed it)
                _unlock(fd)

    def _open_current(self) -> int:
        """The descriptor of the file now at ``path``, opened again when it was deleted,
        replaced or rotated (by us or another process)."""
        fd = self._fd
        if fd is not None:
            if self._is_current(fd):
                return fd
            self._fd = None
            _close(fd)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = _above_stdio(os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                  0o644))
        self._fd = fd
        return fd

    def _is_current(self, fd: int) -> bool:
        """Whether ``fd`` is the file now at ``path`` (same inode)."""
        here = os.fstat(fd)
        try:
            there = os.stat(self._path)
        except FileNotFoundError:
            return False
        return (there.st_ino, there.st_dev) == (here.st_ino, here.st_dev)

    def _cut_partial_line(self, fd: int, start: int, written: int) -> None:
        """Cut what a failed write left, when nothing was appended after it (else the next
        write sees the torn end and starts a line of its own)."""
        try:
            if os.fstat(fd).st_size == start + written:
                os.ftruncate(fd, start)
        except OSError:
            pass

    def _rotate(self, fd: int) -> None:
        """``path`` → ``path.1`` → … → ``path.N``; the next export opens a new file."""
        try:
            if not self._is_current(fd):
                return  # another process rotated it already
            if self._rotated_files:
                for number in range(self._rotated_files - 1, 0, -1):
                    older = self._sibling(number)
                    if older.exists():
                        os.replace(older, self._sibling(number + 1))
                os.replace(self._path, self._sibling(1))
            else:
                os.unlink(self._path)
        except OSError as exc:
            warn_once(f"jsonl-rotate-{self._path}", "agent-latency: cannot rotate %s: %s",
                      self._path, exc)
            return
        self._fd = None
        _close(fd)

    def _sibling(self, number: int) -> Path:
        return self._path.with_name(f"{self._path.name}.{number}")

    def _after_fork_in_child(self) -> None:
        # The parent's lock may have been held by a thread that does not exist here: a new
        # one.  The descriptor is shared with the parent: the child opens its own.
        self._lock = threading.Lock()
        fd, self._fd = self._fd, None
        if fd is not None:
            _close(fd)

    def shutdown(self) -> None:
        with self._lock:
            if self._fd is not None:
                _close(self._fd)
                self._fd = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _above_stdio(fd: int) -> int:
    """``fd`` moved above 0-2.  With stderr closed (``2>&-``) the file would get descriptor
    2, and whatever writes there (a C library, ``faulthandler``, ``os.write(2, …)``) would
    land inside the trace file."""
    if fd > 2:
        return fd
    try:
        # POSIX only.
        import fcntl

        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except (ImportError, OSError):  # not POSIX, or no descriptors left: keep it as it is
        return fd
    _close(fd)
    return moved


# How long a write waits for another writer's lock on the file before it writes without it:
# a writer stopped mid-write (SIGSTOP, a debugger) must not stop the program's exports.
_LOCK_WAIT_S = 2.0


def _lock(fd: int) -> bool:
    """An exclusive advisory lock on ``fd``'s file (``flock``: one per open file, so a
    forked child's own descriptor waits for its parent's), waited for up to
    ``_LOCK_WAIT_S``; False when not taken."""
    if fcntl is None:
        return False
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)  # (short: a writer holds it for one write)
        except OSError:
            return False


def _unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _last_byte(fd: int, size: int) -> bytes:
    try:
        return os.pread(fd, 1, size - 1)
    except OSError:
        return b"\n"


def spans_to_otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """OTLP/JSON (hex ids, camelCase, int64 as strings, enums as integers) for a batch of
    SDK spans, encoded directly (``_otlp_json``)."""
    return encode_request(spans)


_LLM_CALLS = semconv.budget_count("llm_calls")
_TOOL_CALLS = semconv.budget_count("tool_calls")


class TaskSummaryPrinter(SpanProcessor):
    """Prints one line per finished task, e.g. ``task fix 12.41s = output 4.10 | …``, on
    stderr (``_console``: whole lines, escaped names, never into the program's own files).

    The implicit process task (``instrument()`` alone) gets a line only for LLM calls or
    tools of its own: a program that made none, or made them all inside its own tasks or
    agent runs (explicit tasks win), would only be told how long it ran.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        # On stderr as it is now: never into a file of the program's (``_console``).
        self._lines = ConsoleLines(stream)
        # LLM and tool calls of the tasks that ended right under the implicit process task.
        self._nested: dict[int, list[int]] = {}

    def _remember(self, span: ReadableSpan, attrs: Any) -> None:
        parent = span.parent
        implicit = process_task.span if process_task.implicit else None
        # Only tasks right under the implicit process task: bounded to one entry.
        if (parent is not None and implicit is not None
                and parent.span_id == implicit.get_span_context().span_id):
            seen = self._nested.setdefault(parent.span_id, [0, 0])
            seen[0] += int(attrs.get(_LLM_CALLS) or 0)
            seen[1] += int(attrs.get(_TOOL_CALLS) or 0)

    def _has_own_work(self, span: ReadableSpan, attrs: Any) -> bool:
        nested = self._nested.pop(span.context.span_id, [0, 0])
        return (int(attrs.get(_LLM_CALLS) or 0) > nested[0]
                or int(attrs.get(_TOOL_CALLS) or 0) > nested[1])

    def on_end(self, span: ReadableSpan) -> None:
        # Values of our own attributes, numbers where float() reads them.
        attrs: Mapping[str, Any] = span.attributes or {}
        name = attrs.get(semconv.TASK_NAME)
        if name is None or semconv.BUDGET_WALL not in attrs:
            return
        try:
            if attrs.get(semconv.PROCESS_TASK):
                if not self._has_own_work(span, attrs):
                    return
            else:
                self._remember(span, attrs)
        except Exception:  # noqa: BLE001, S110 - a line is not worth an error
            pass
        budget = Budget(
            wall=float(attrs[semconv.BUDGET_WALL]),
            shares={c: float(attrs.get(semconv.budget_share(c), 0.0)) for c in COMPONENTS},
            busy={c: float(attrs.get(semconv.budget_busy(c), 0.0)) for c in COMPONENTS},
            # What the line says of calls whose prefill/output split is not measured.
            counts={c: int(attrs.get(semconv.budget_count(c)) or 0)
                    for c in ("llm_calls", *SPLIT_COUNTS)},
        )
        adopt_other_parts(budget, attrs)
        self._lines.print(budget.summary(shown_name(name)))
