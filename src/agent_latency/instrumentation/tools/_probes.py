"""Processes a library starts for itself (platform probes, an SDK's own, import-time checks):
not the program's tools."""

from __future__ import annotations

import sys
from types import FrameType

from ..net import CURRENT

# Modules whose processes are the Python runtime's own probes, not tools: ``platform``
# spawns ``uname -p`` the first time anything (the openai SDK's first request) asks.
_PROBE_MODULES = frozenset({"platform", "ctypes.util", "uuid"})
# Code run by an ``import`` statement (GitPython runs ``git version`` when imported).
_IMPORT_FRAMES = frozenset({"<frozen importlib._bootstrap>",
                            "<frozen importlib._bootstrap_external>"})
_PROBE_DEPTH = 64


def library_probe() -> bool:
    """Whether the process being started is a library's own, not the program's tool: one
    started while an LLM call of ours is being sent (an SDK's platform probe), by a module
    of :data:`_PROBE_MODULES`, or while a module is being imported.  Looked up once per
    spawn (a few microseconds, against a millisecond for the spawn)."""
    if CURRENT.get() is not None:
        return True
    frame: FrameType | None = sys._getframe(2)
    for _ in range(_PROBE_DEPTH):
        if frame is None:
            return False
        if (frame.f_globals.get("__name__") in _PROBE_MODULES
                or frame.f_code.co_filename in _IMPORT_FRAMES):
            return True
        frame = frame.f_back
    return False
