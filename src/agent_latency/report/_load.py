"""Reading stored spans into tasks (:func:`load_tasks`) and summaries
(:func:`summarize_sources`), from files, directories and backends."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._cli import BadInput, Progress, total_size
from ._files import trace_files
from ._keys import BUDGET_KEYS
from ._parallel import PartsFailed, summarize_in_parts, workers_for
from ._sources import iter_sources
from ._summarize import no_cyclic_gc, summarize_traces
from ._summary import Summary, start_order
from ._tasks import StoredTask, find_tasks


def load_tasks(path: str | Path | list[Path], task: str | None = None, *,
               rotated: bool = False, keep_going: bool = True, selection: Any = None,
               progress: Progress | None = None, notes: list[str] | None = None,
               on_span: Any = None) -> tuple[list[StoredTask], list[str]]:
    """Read trace files and return their tasks in start order (optionally only those named
    ``task``, or those ``selection(task)`` keeps), each with its intervals (for what-ifs),
    and the problems met.  ``path`` is one file or a list of files; ``rotated`` reads one
    file's rotated siblings first.  Without ``keep_going`` the first unreadable line raises
    :class:`BadInput`.  ``notes``, when given, receives what is stated but is not bad input
    (spans counted as other, clock skew corrected, spans in no task); otherwise it is
    returned with the problems.  ``on_span`` is :func:`find_tasks`'s: each counted span with
    its task (the spans' budget attributes only).

    Streams: a trace's spans are held only until its last line is read and its tasks are
    computed, with only the attributes budgets need.
    """
    paths: Sequence[str | Path]
    if isinstance(path, list):  # noqa: SIM108 - room for the comment below
        paths = path
    else:
        # A backend URL stays a string: Path() would fold its "//".
        paths = trace_files(path) if rotated else [path]
    problems: list[str] = []
    stated: list[str] = []
    tasks: list[StoredTask] = []
    progress = progress or Progress(0, enabled=False)
    with no_cyclic_gc():
        try:
            for spans in iter_sources(paths, problems, keep=BUDGET_KEYS,
                                      on_bytes=progress.feed(), notes=stated,
                                      skip_unreadable=keep_going):
                if problems and not keep_going:
                    raise BadInput(problems[0])
                found, more = find_tasks(spans, on_span=on_span)
                tasks.extend(t for t in found if (task is None or t.name == task)
                             and (selection is None or selection(t)))
                stated.extend(more)
            if problems and not keep_going:
                raise BadInput(problems[0])
        finally:
            progress.close()
    tasks.sort(key=start_order)
    if notes is None:
        return tasks, problems + stated
    notes.extend(stated)
    return tasks, problems


def summarize_sources(paths: list[Path], selection: Any = None, *, keep_going: bool = True,
                      keep_tasks: bool = False, slowest: int = 5,
                      progress: Progress | None = None,
                      ) -> tuple[Summary, list[str], list[str]]:
    """Read ``paths`` a trace at a time into a :class:`Summary` of the tasks ``selection``
    keeps; also the unreadable input met (``problems``) and the spans the budget could not
    use as they were (``warnings``: counted as other).

    Without ``keep_going`` the first unreadable line raises :class:`BadInput`.  Task
    intervals are dropped once budgets are computed: memory holds figures, not spans.
    Large OTLP/JSON lines files are read by several processes (``report/_parallel.py``),
    with the same result.
    """
    problems: list[str] = []
    notes: list[str] = []  # clock skew corrected, spans in no task: stated, not bad input
    size = total_size(paths)
    progress = progress or Progress(size)
    with no_cyclic_gc():
        try:
            workers = workers_for(paths, size)
            if workers > 1:
                try:
                    return summarize_in_parts(paths, workers, selection, keep=BUDGET_KEYS,
                                              keep_going=keep_going, keep_tasks=keep_tasks,
                                              slowest=slowest, progress=progress)
                except PartsFailed as exc:
                    notes.append(f"{exc}; read again in one process")
                    progress.restart()
            traces = iter_sources(paths, problems, keep=BUDGET_KEYS, on_bytes=progress.feed(),
                                  notes=notes, skip_unreadable=keep_going)
            summary, warnings = summarize_traces(
                traces, selection, problems=problems, keep_going=keep_going,
                keep_tasks=keep_tasks, slowest=slowest)
        finally:
            progress.close()
    return summary, problems, notes + warnings


