"""What the ``report`` and ``whatif`` command lines share: one-line errors (exit status 2 for
bad input), sources, time filters and the progress bar."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any, NoReturn

from ._files import demo_file, trace_files
from ._http import redact_userinfo
from ._read import TraceFileError
from ._sources import FILE_FORMATS, is_backend
from ._text import safe_text
from ._times import iso_time

#: Exit status for bad input (unreadable files, malformed lines, bad arguments).
BAD_INPUT = 2
#: Exit status when there was nothing to report.
NOTHING = 1


class BadInput(Exception):
    """Input that stops the command: one line, naming the file and the line or offset."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (and ``--help`` a hint), status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def add_source_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    """SOURCE…, --task, --since, --until, --service and --keep-going."""
    parser.add_argument("sources", nargs="*", metavar="SOURCE",
                        help=f"trace files (OTLP/JSON, OTLP/protobuf, the Collector's file "
                             "exports), directories of them, or backend URLs "
                             "(jaeger+http://…, tempo+http://…, phoenix+http://…; see "
                             f"docs/report.md) (default {default} and its rotated files; "
                             "the demo's while they do not exist)")
    parser.add_argument("--task", action="append", metavar="NAME",
                        help="only tasks with this name (repeatable)")
    parser.add_argument("--since", type=_time_arg, metavar="TIME",
                        help="only tasks started at or after TIME: ISO 8601 (UTC unless it "
                             "names a zone) or a duration ago (30m, 2h, 7d)")
    parser.add_argument("--until", type=_time_arg, metavar="TIME",
                        help="only tasks started before TIME (as --since)")
    parser.add_argument("--service", action="append", metavar="NAME",
                        help="only tasks of this service.name (repeatable); a Jaeger URL "
                             "without ?service= asks Jaeger for each")
    parser.add_argument("--keep-going", action="store_true",
                        help="report everything readable, each unreadable line on stderr "
                             "(exit status 2 when there was any); without it the first "
                             "unreadable line stops the command")


def add_trace_url_argument(parser: argparse.ArgumentParser) -> None:
    """``--trace-url TEMPLATE``: the HTML page's trace ids become links."""
    parser.add_argument("--trace-url", type=_trace_url_arg, metavar="TEMPLATE",
                        help="with --html, make each trace id a link: TEMPLATE with "
                             "{trace_id} in it, e.g. http://localhost:16686/trace/{trace_id}")


def _trace_url_arg(text: str) -> str:
    # jinja2 (the [report] extra) only for --trace-url.
    from ._html import trace_url_template

    try:
        return trace_url_template(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str, now: float | None = None) -> int:
    """``TIME`` as epoch nanoseconds: ISO 8601 (UTC unless it names a zone) or a duration
    before now (``30m``, ``2h``, ``7d``)."""
    match = _DURATION.match(text)
    if match:
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
        return round(((time.time() if now is None else now) - seconds) * 1e9)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO 8601 time nor a duration like 2h") \
            from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) \
        * 1000


def _time_arg(text: str) -> int:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def with_services(sources: list[str], services: list[str] | None) -> list[str]:
    """``sources`` with each Jaeger URL that names no service (nor trace) asked once per
    ``--service`` (Jaeger's query API needs one): ``report jaeger+http://HOST:16686
    --service my-agent`` reads ``…?service=my-agent``."""
    out: list[str] = []
    for source in sources:
        base, _, query = source.partition("?")
        keys = {key for key, _ in urllib.parse.parse_qsl(query, keep_blank_values=True)}
        if not services or not base.startswith("jaeger+") or keys & {"service", "trace"}:
            out.append(source)
            continue
        out.extend(f"{base}?{query + '&' if query else ''}"
                   f"{urllib.parse.urlencode({'service': name})}" for name in services)
    return out


def source_paths(sources: list[str], default: str) -> tuple[list[Path], str | None]:
    """The files to read, and a note to print when they are not the ones asked for.

    No SOURCE: the default with its rotated files, or, while none of them exists, the
    demo's traces beside it (``agent-latency demo`` then ``agent-latency report``; the note
    says so).  A directory stands for its ``*.jsonl``, ``*.json``, ``*.pb`` and ``*.binpb``
    files (and the local default's rotated ``traces.jsonl.N``), oldest rotation first.
    Backend URLs and format-prefixed files are passed on as they are (strings).
    """

    if not sources:
        demo = demo_file(default)
        if demo is None:
            return trace_files(default), None
        return trace_files(demo), (f"no {default} yet: reading the demo's traces, {demo} "
                                   "(agent-latency demo wrote them)")
    paths: list[Path] = []

    for source in sources:
        if is_backend(source) or source.startswith(tuple(f + ":" for f in FILE_FORMATS)):
            paths.append(source)  # type: ignore[arg-type]  # read by report/_sources.py
            continue
        path = Path(source)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and (
                p.suffix in {".jsonl", ".json", ".pb", ".binpb"}))
            rotated = [p for f in found if f.name.endswith(".jsonl")
                       for p in trace_files(f)[:-1]]
            if not found and not rotated:
                raise TraceFileError(f"{path}: no .jsonl or .json files in this directory")
            paths.extend(rotated + found)
        else:
            paths.append(path)
    return paths, None


class Selection:
    """Which tasks the filters keep."""

    __slots__ = ("names", "services", "since_ns", "until_ns")

    def __init__(self, args: argparse.Namespace) -> None:
        self.names = set(args.task) if args.task else None
        self.services = set(args.service) if args.service else None
        self.since_ns: int | None = args.since
        self.until_ns: int | None = args.until

    def __call__(self, task: Any) -> bool:
        span = task.span
        return ((self.names is None or task.name in self.names)
                and (self.services is None or span.service in self.services)
                and (self.since_ns is None or span.start_ns >= self.since_ns)
                and (self.until_ns is None or span.start_ns < self.until_ns))

    def describe(self) -> str:
        """The filters in words ("" when none)."""
        parts = []
        if self.names:
            parts.append("named " + ", ".join(sorted(self.names)))
        if self.services:
            parts.append("of service " + ", ".join(sorted(self.services)))
        if self.since_ns is not None:
            parts.append("since " + _iso(self.since_ns))
        if self.until_ns is not None:
            parts.append("before " + _iso(self.until_ns))
        return " ".join(parts)


def _iso(ns: int) -> str:
    return iso_time(ns)


class Progress:
    """A progress bar on stderr for reads longer than a second, on a terminal only.

    Fed line sizes by the reader (two passes: a quick scan, then the parse), it appears once
    a second has passed and clears itself at the end.  Without a terminal, or without rich,
    it does nothing.
    """

    __slots__ = ("_bar", "_done", "_last", "_next_at", "_started", "_stream", "_task",
                 "_total", "enabled")

    _DELAY_S = 1.0
    _EVERY_S = 0.1

    def __init__(self, total_bytes: int, stream: IO[str] | None = None,
                 enabled: bool | None = None) -> None:
        self._stream = stream or sys.stderr
        if enabled is None:
            enabled = _is_terminal(self._stream) and os.environ.get("TERM") != "dumb"
        self.enabled = enabled and total_bytes > 0
        self._total = total_bytes * 2  # scan and parse
        self._done = 0
        self._started = time.monotonic()
        self._next_at = self._started + self._DELAY_S
        self._bar: Any = None
        self._task: Any = None
        self._last = 0

    def feed(self) -> Callable[[int], None] | None:
        """The reader's byte counter, or ``None`` when disabled (no cost per line)."""
        return self.add if self.enabled else None

    def add(self, size: int) -> None:
        """``size`` more bytes read."""
        self._done += size
        now = time.monotonic()
        if now < self._next_at:
            return
        self._next_at = now + self._EVERY_S
        if self._bar is None and not self._start():
            return
        self._bar.update(self._task, completed=self._done)
        self._bar.refresh()

    def restart(self) -> None:
        """Count from zero again (a read started over)."""
        self._done = 0

    def _start(self) -> bool:
        try:
            # rich only when a progress bar is drawn (a terminal, a long read).
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
        except ImportError:
            self.enabled = False
            return False
        # Percent, not bytes: both passes count, so bytes would read twice the file size.
        self._bar = Progress(TextColumn("reading traces"),
                             BarColumn(), TextColumn("{task.percentage:>3.0f} %"),
                             TimeElapsedColumn(), TimeRemainingColumn(),
                             console=Console(file=self._stream), transient=True,
                             # Redrawn by add(), not by a thread: the report may fork
                             # workers (report/_parallel.py), safe only without threads.
                             auto_refresh=False)
        self._bar.start()
        self._task = self._bar.add_task("read", total=self._total, completed=self._done)
        return True

    def close(self) -> None:
        """Clear the bar, if it was shown."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def total_size(paths: list[Path]) -> int:
    """The sum of the sizes of the files that exist."""
    total = 0
    for path in paths:
        try:
            total += Path(path).stat().st_size
        except OSError:  # a backend URL has no size
            pass
    return total


def fail(prog: str, message: str, status: int = BAD_INPUT) -> int:
    """Print one error line and return ``status``."""
    say(prog, message)
    return status


def say(prog: str, message: str) -> None:
    """Print ``message`` on stderr as one line, its untrusted parts (names, ids, a
    server's words) escaped, a URL's password hidden."""
    print(f"{prog}: {safe_text(redact_userinfo(_one_line(message)))}", file=sys.stderr)


def _one_line(message: str) -> str:
    return " ".join(str(message).split("\n"))
