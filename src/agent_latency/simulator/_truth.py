"""Ground truth: what the simulator really did for each request.

Wall-clock fields (``*_at``) are ``time.time()`` seconds; each has a ``*_at_mono`` twin
from ``time.perf_counter()`` (CLOCK_MONOTONIC, comparable across processes on Linux).
``received_at_mono`` is when the request's last byte reached the server (the kernel's
receive stamp of the newest byte of the last read before the record), and ``started_at``
when its handler had the request parsed (a loaded machine can hold the server milliseconds
between the two: server time a client sees before the first token, where
``first_token_at - started_at`` does not).  For streams
``first_token_at``/``last_token_at`` are when the first/last chunk carrying an output token
was handed to the socket; for non-streaming responses they are when those tokens were
generated, and ``response_written_at`` is when the body was handed to the socket.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

_FIELDS = (
    "request_id", "api", "model", "stream", "status", "input_tokens", "output_tokens",
    "queue_s", "prefill_s", "output_generation_s", "received_at_mono", "started_at",
    "started_at_mono",
    "prefill_started_at", "prefill_started_at_mono", "first_token_at", "first_token_at_mono",
    "first_token_write_mono", "last_token_at", "last_token_at_mono", "last_token_write_mono",
    "response_written_at", "response_written_at_mono",
    "finished_at", "finished_at_mono", "fault", "fault_delay_s", "connection_id",
    "new_connection", "transport", "prefill_tps", "output_tps", "tokens_per_chunk",
    "chunks", "finish_reason", "rtt_s", "turn", "traceparent",
)


class TruthRecord:
    """One request's ground truth; :meth:`to_dict` gives the JSON line."""

    __slots__ = _FIELDS

    # A field is None until the step that measures it sets it (to_dict writes None).
    request_id: str
    api: str
    model: str
    stream: bool
    status: int | None
    input_tokens: int | None
    output_tokens: int | None
    queue_s: float | None
    prefill_s: float | None
    output_generation_s: float | None
    # When the request's last byte reached the server (None where no socket is seen: the
    # in-process handlers' tests).
    received_at_mono: float | None
    # Marked when the record is made / when prefill starts, before anything reads them.
    started_at: float
    started_at_mono: float
    prefill_started_at: float
    prefill_started_at_mono: float
    first_token_at: float | None
    first_token_at_mono: float | None
    # When the write of the first/last output chunk started (streams): the truth lies between
    # this and ``*_at_mono`` (a loaded machine can hold the server between the two).
    first_token_write_mono: float | None
    last_token_write_mono: float | None
    last_token_at: float | None
    last_token_at_mono: float | None
    response_written_at: float | None
    response_written_at_mono: float | None
    finished_at: float | None
    finished_at_mono: float | None
    fault: str | None
    fault_delay_s: float | None
    connection_id: int | None
    new_connection: bool | None
    transport: str | None
    prefill_tps: float | None
    output_tps: float | None
    tokens_per_chunk: int | None
    chunks: int | None
    finish_reason: str | None
    rtt_s: float | None
    turn: int | None
    traceparent: str | None

    def __init__(self, **values: Any) -> None:
        for name in _FIELDS:
            setattr(self, name, values.get(name))

    def mark(self, name: str) -> None:
        """Set ``name`` (wall) and ``name_mono`` (monotonic) to now."""
        mono = time.perf_counter()
        setattr(self, name, time.time())
        setattr(self, name + "_mono", mono)

    def to_dict(self) -> dict[str, Any]:
        """The record as a plain dict (every field, ``None`` when unknown)."""
        return {name: getattr(self, name) for name in _FIELDS}


class TruthLog:
    """Keeps every record in memory and appends each to a JSONL file if one is given."""

    __slots__ = ("_lock", "_path", "records")

    def __init__(self, path: str | Path | None = None) -> None:
        self._path = Path(path) if path else None
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] = []

    def add(self, record: TruthRecord) -> None:
        """Store a finished record (called once per request)."""
        data = record.to_dict()
        with self._lock:
            # file first: readers poll ``records`` without the lock, then read the file
            if self._path is not None:
                with self._path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(data) + "\n")
            self.records.append(data)
