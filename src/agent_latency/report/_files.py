"""Where the report reads by default, and a trace file's rotated siblings."""

from __future__ import annotations

import os
from pathlib import Path

from .. import semconv
from .._local import DEFAULT_DIR, DEMO_SUBDIR, ROTATED_FILES, TRACES_FILE


def default_file() -> str:
    """``$AGENT_LATENCY_DIR/traces.jsonl`` (default ``.agent-latency/traces.jsonl``): where
    ``instrument()`` writes, so the report reads what the program wrote."""
    directory = os.environ.get(semconv.ENV_OUTPUT_DIR, "").strip() or DEFAULT_DIR
    return str(Path(directory) / TRACES_FILE)


def trace_files(path: str | Path) -> list[Path]:
    """``path``'s rotated files that exist, oldest first, then ``path`` itself."""
    path = Path(path)
    rotated = [path.with_name(f"{path.name}.{n}") for n in range(ROTATED_FILES, 0, -1)]
    older = [p for p in rotated if p.is_file()]
    # With rotated files but no current one (just rotated), read what there is.
    return [*older, path] if path.exists() or not older else older


def demo_file(default: str) -> Path | None:
    """The demo's traces beside ``default`` (``.agent-latency/demo/traces.jsonl``) when
    ``default`` and its rotated files do not exist but the demo's do: what a first
    ``agent-latency report`` after ``agent-latency demo`` reads.  None otherwise."""
    path = Path(default)
    if any(p.exists() for p in trace_files(path)):
        return None
    demo = path.parent / DEMO_SUBDIR / path.name
    return demo if any(p.is_file() for p in trace_files(demo)) else None
