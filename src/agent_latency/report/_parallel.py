"""A large OTLP/JSON lines stream summarized by several processes, one part each.

Parsing is most of a report's CPU and one process uses one core: a 1,000,000-span file
takes one core 10–14 s.  The stream is cut into parts of about equal size at line starts;
forked workers scan one part each (``_Reader.scan``: where each trace's lines are), the
scans are joined here into the whole stream's, then workers parse one part each and
summarize the traces that lie wholly inside it, exactly as one process would.  The few
traces that cross a cut come back as spans and are summarized here, whole.  The parts'
summaries merge into one: percentiles, counts, tasks and the slowest lists are those of a
single read (``tests/report/test_parallel.py``), problems come in line order.

Used only where it is safe and pays: plain OTLP/JSON lines files (not a pretty-printed
document, not a backend), at least ``MIN_BYTES`` in all, more than one CPU, the ``fork``
start method, and no thread in this process (a fork copies locks other threads may hold).
``AGENT_LATENCY_REPORT_WORKERS`` sets the number of processes (``1``: one process; unset
or ``0``: one per CPU, at most ``MAX_WORKERS``, for files of ``MIN_BYTES`` or more; ``N``:
``N`` processes whatever the size).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._env import env_int
from ._cli import BadInput, Progress
from ._read import (
    Cut,
    Scan,
    StoredSpan,
    TraceFileError,
    _Reader,
    check_found_any,
    complete_traces,
    not_json,
)
from ._sources import check_traces
from ._summarize import summarize_traces
from ._summary import Summary, start_order
from ._times import drop_repeats
from ._trace_files import sniff

#: Below this many bytes in all, one process (starting workers costs more than it saves).
MIN_BYTES = 64 << 20
MAX_WORKERS = 8
WORKERS_ENV = "AGENT_LATENCY_REPORT_WORKERS"


@dataclass(slots=True)
class _Job:
    """What every worker reads (inherited through the fork, never pickled)."""

    paths: list[Path]
    keep: Any
    scan: Scan  # the whole stream's, once the parts are scanned
    starts: list[Cut]  # each part's first line
    selection: Any
    keep_going: bool
    keep_tasks: bool
    slowest: int
    progress: Any  # a shared array of bytes read, one slot per worker, or None


@dataclass(slots=True)
class _Part:
    """One worker's result."""

    summary: Summary | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: The spans of the traces that cross this part's bounds, by trace id, in line order.
    crossing: dict[str, list[StoredSpan]] = field(default_factory=dict)
    documents_read: int = 0
    error: Exception | None = None


_job: _Job | None = None


def workers_for(paths: list[Any], total_bytes: int) -> int:
    """How many processes should read ``paths`` (1: read here, as always)."""
    wanted = env_int(WORKERS_ENV, 0, minimum=-1, maximum=256)
    if wanted == 1:
        return 1
    if wanted == 0:
        if total_bytes < MIN_BYTES:
            return 1
        wanted = min(_cpus(), MAX_WORKERS)
    if (wanted < 2 or "fork" not in multiprocessing.get_all_start_methods()
            or _other_threads() or not _plain_json_lines(paths)):
        return 1
    return wanted


def _other_threads() -> bool:
    """Whether a thread besides this one runs (a fork would copy the locks it holds)."""
    return threading.active_count() > 1


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _plain_json_lines(paths: list[Any]) -> bool:
    """Whether every path is a local OTLP/JSON lines file whose first line is a document of
    its own (else the one-process reader decides: a pretty-printed document, protobuf, a
    backend URL, which source_paths passes on as a string)."""
    for path in paths:
        if not isinstance(path, Path) or not path.is_file():
            return False
        try:
            if sniff(path) != "otlp-json":
                return False
            with path.open("rb") as f:
                if not_json(f.readline()):
                    return False
        except (OSError, TraceFileError):
            return False
    return True


def summarize_in_parts(paths: list[Path], workers: int, selection: Any, *, keep: Any,
                       keep_going: bool, keep_tasks: bool, slowest: int,
                       progress: Progress) -> tuple[Summary, list[str], list[str]]:
    """``report.summarize_sources`` for OTLP/JSON lines files (see the module doc): the
    summary, the problems and the notes and warnings, as one process would give them."""

    global _job
    reader = _Reader(paths, keep)
    starts = _part_starts(reader, paths, workers)
    read: Any = multiprocessing.get_context("fork").Array("q", len(starts), lock=False) \
        if progress.enabled else None
    _job = _Job(paths, keep, Scan({}, {}, {}), starts, selection, keep_going, keep_tasks,
                slowest, read)
    try:
        scans = _run(_scan_part, len(starts), progress)
        _job.starts, _job.scan = _number_parts(starts, scans)
        results = _run(_summarize_part, len(starts), progress)
    finally:
        _job = None
    summary = Summary(slowest=slowest, keep_tasks=keep_tasks)
    problems: list[str] = []
    notes: list[str] = []
    warnings: list[str] = []
    crossing: dict[str, list[StoredSpan]] = {}
    for part in results:
        problems += part.problems
        if part.summary is not None:
            summary.merge(part.summary)
        notes += part.notes
        warnings += part.warnings
        for trace_id, spans in part.crossing.items():
            crossing.setdefault(trace_id, []).extend(spans)
    problems = drop_repeats(problems)
    check_found_any(paths, sum(part.documents_read for part in results), problems)
    for part in results:
        if part.error is not None:
            raise part.error
    if problems and not keep_going:
        raise BadInput(problems[0])
    rest, more = summarize_traces(check_traces(crossing.values(), notes), selection,
                                  keep_tasks=keep_tasks, slowest=slowest)
    summary.merge(rest)
    summary.tasks.sort(key=start_order)
    return summary, problems, notes + warnings + more


def _part_starts(reader: _Reader, paths: list[Path], parts: int) -> list[Cut]:
    """Where each part starts (indexes and line numbers not known yet): the first line
    starting at or after each ``k / parts`` of the bytes."""
    sizes = [path.stat().st_size for path in paths]
    total = sum(sizes)
    starts: list[tuple[int, int]] = [(0, 0)]
    for k in range(1, parts):
        target, file_no = total * k // parts, 0
        while file_no < len(sizes) - 1 and target >= sizes[file_no]:
            target -= sizes[file_no]
            file_no += 1
        start = reader.line_start_after(file_no, target)
        if start is not None and start > starts[-1]:
            starts.append(start)
    return [Cut(0, file_no, offset, 1) for file_no, offset in starts]


def _number_parts(starts: list[Cut], scans: list[Scan]) -> tuple[list[Cut], Scan]:
    """The parts' first line indexes and numbers, and the whole stream's scan, from each
    part's own scan (its lines counted from 0)."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    lines: dict[int, int] = {}
    numbered: list[Cut] = []
    base = 0
    for start, scan in zip(starts, scans, strict=True):
        numbered.append(Cut(base, start.file, start.offset, lines.get(start.file, 0) + 1))
        for trace_id, line in scan.first.items():
            if trace_id not in first:
                first[trace_id] = base + line
        for trace_id, line in scan.last.items():
            last[trace_id] = base + line
        for file_no, count in scan.lines.items():
            lines[file_no] = lines.get(file_no, 0) + count
        base += sum(scan.lines.values())
    return numbered, Scan(first, last, lines)


class PartsFailed(RuntimeError):
    """A worker ended without its result (killed, out of memory, a fault of ours): the
    caller reads again in one process."""


def _run(work: Callable[[int], Any], parts: int, progress: Progress) -> list[Any]:
    """``work(k)`` for each part, each in a forked worker, the progress bar fed meanwhile.

    Plain processes and pipes, not a pool: a pool waits forever for a worker that was
    killed; here its pipe closes and :class:`PartsFailed` says which.  Workers ignore
    Ctrl-C: the main process gets it and stops them.
    """
    context = multiprocessing.get_context("fork")
    children: list[tuple[Any, Any]] = []
    read = _job.progress if _job is not None else None
    fed = sum(read) if read is not None else 0  # before any worker counts
    try:
        for number in range(parts):
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=_child, args=(work, number, send), daemon=True,
                                    name=f"agent-latency-report-{number}")
            child.start()
            send.close()
            children.append((child, receive))
        results: list[Any] = [None] * parts
        waiting: dict[Any, int] = {pipe: number for number, (_, pipe) in enumerate(children)}
        while waiting:
            for ready in multiprocessing.connection.wait(list(waiting), timeout=0.1):
                number = waiting.pop(ready)
                try:
                    outcome, value = pickle.loads(  # noqa: S301 - our own worker's
                        children[number][1].recv_bytes())
                except (EOFError, OSError):
                    child = children[number][0]
                    child.join(5)
                    raise PartsFailed(f"reading in parts failed: worker {number} ended "
                                      f"with exit status {child.exitcode}") from None
                if outcome == "fault":
                    raise PartsFailed(f"reading in parts failed: {value}")
                results[number] = value
            if read is not None:
                done = sum(read)
                progress.add(done - fed)
                fed = done
        return results
    finally:
        for child, receive in children:
            if child.is_alive():
                child.terminate()
            child.join()
            receive.close()


def _child(work: Callable[[int], Any], number: int, send: Any) -> None:
    """A worker's body: ``work(number)`` sent back, or the fault that stopped it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = ("ok", work(number))
        # Pickled here, not by send(): a result that cannot be pickled (a chain of tasks
        # too deep for pickle's recursion) is a fault like any other, not a traceback.
        message = pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - reported to the main process, which reads again
        message = pickle.dumps(("fault", f"{type(exc).__name__}: {exc}"))
    send.send_bytes(message)
    send.close()


def _scan_part(number: int) -> Scan:
    """In a worker: the first pass over part ``number``."""
    job = _job
    assert job is not None  # noqa: S101 - set before the fork
    start = job.starts[number]
    end = job.starts[number + 1] if number + 1 < len(job.starts) else None
    reader = _Reader(job.paths, job.keep, on_bytes=_byte_counter(job, number))
    return reader.scan(start, (end.file, end.offset) if end is not None else None)


def _byte_counter(job: _Job, number: int) -> Callable[[int], None] | None:
    read = job.progress
    if read is None:
        return None

    def on_bytes(size: int) -> None:
        read[number] += size

    return on_bytes


def _summarize_part(number: int) -> _Part:
    """In a worker: summarize the traces wholly inside part ``number``."""

    job = _job
    assert job is not None  # noqa: S101 - set before the fork
    start = job.starts[number]
    stop = job.starts[number + 1].index if number + 1 < len(job.starts) else None
    part = _Part()
    reader = _Reader(job.paths, job.keep, part.problems, _byte_counter(job, number))
    traces = complete_traces(reader.documents(start, stop), job.scan, part.crossing,
                             start.index)
    try:
        part.summary, part.warnings = summarize_traces(
            check_traces(traces, part.notes), job.selection, problems=part.problems,
            keep_going=job.keep_going, keep_tasks=job.keep_tasks, slowest=job.slowest)
    except (BadInput, TraceFileError) as exc:
        part.error = exc
    part.documents_read = reader.documents_read
    return part
