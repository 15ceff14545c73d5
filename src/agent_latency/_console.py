"""Where the live task line goes: the program's stderr, one whole line per write, and
never into a file of the program's own.

Three things can go wrong with a line printed from a span processor:

* **The descriptor changed hands.**  A program may close descriptor 2 and open a data file,
  which then gets descriptor 2; ``sys.stderr`` still writes there, into the program's file.
  So the file behind the descriptor is noted (device and inode) when ``instrument()`` runs,
  and a line is printed only while the descriptor still is that file; otherwise it is left
  out (the spans are recorded as always).  Holding a duplicate of the old stderr instead
  would keep that file open behind the program's back: a daemon that closes its stderr so
  that its parent's pipe ends would never end it.  A program that points stderr elsewhere
  on purpose with ``dup2`` loses the line the same way: the descriptor alone cannot say
  which of the two happened.  A stream without a descriptor (``io.StringIO``, a test's
  capture) is the program's choice and is written to as it is.
* **Threads.**  ``print(line)`` writes the line and the newline apart: two threads ending
  tasks together interleave (``…idle 0.03)task w193 …`` and an empty line).  Each line here
  is one ``write`` with its newline, under one lock, then flushed: one system call.
* **The name.**  A task's name is the program's text: controls and bidirectional marks are
  shown as escapes (``_safe_text``) and it is cut to :data:`NAME_LIMIT` characters.
"""

from __future__ import annotations

import os
import sys
from typing import IO

from ._locks import ForkSafeLock
from ._safe_text import safe_name

NAME_LIMIT = 120
"""The most characters of a task's name the task line shows (the cut one ends ``…``)."""

_lock = ForkSafeLock()


def shown_name(name: object) -> str:
    """A task's name as the task line shows it: escaped, at most :data:`NAME_LIMIT` long."""
    return safe_name(name, NAME_LIMIT)


def _file_of(fd: int) -> tuple[int, int] | None:
    """The file behind descriptor ``fd`` (device, inode); None when it is closed."""
    try:
        status = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return status.st_dev, status.st_ino


class ConsoleLines:
    """Prints whole lines on ``stream``, or by default on the program's stderr while it is
    still the file it was when this was made (see the module's docstring)."""

    __slots__ = ("_files", "_stream")

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        # The file behind each descriptor seen; stderr's noted now, before the program can
        # close it.
        self._files: dict[int, tuple[int, int] | None] = {2: _file_of(2)}

    def print(self, line: str) -> None:
        """``line`` and its newline in one write; nothing when stderr is closed or its
        descriptor is now another file.  Never raises."""
        stream = self._stream if self._stream is not None else sys.stderr
        if stream is None:  # stderr closed (``2>&-``)
            return
        try:
            if self._stream is None and not self._same_file(stream):
                return
            with _lock:
                stream.write(line + "\n")
                stream.flush()
        except Exception:  # noqa: BLE001, S110 - a broken stderr must not break the program
            pass

    def _same_file(self, stream: IO[str]) -> bool:
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):  # no descriptor: nothing to mistake
            return True
        now = _file_of(fd)
        return now is not None and self._files.setdefault(fd, now) == now
