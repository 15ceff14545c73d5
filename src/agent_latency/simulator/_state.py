"""Per-server shared state: config, clock, capacity, script, faults, truth, connections."""

from __future__ import annotations

import itertools
import uuid
import weakref
from typing import Any

from ._config import SimulatorConfig
from ._faults import FaultInjector
from ._script import Script
from ._timing import AdmissionGate, Capacity, PreciseClock
from ._truth import TruthLog, TruthRecord


class ServerState:
    """Everything the request handlers of one simulator share."""

    __slots__ = ("_conn_ids", "_connections", "_last_reads", "capacity", "clock", "config",
                 "faults", "gate", "script", "truth")

    def __init__(self, config: SimulatorConfig, truth: TruthLog | None = None) -> None:
        self.config = config
        self.clock = PreciseClock(config.spin_us)
        self.capacity = Capacity(config.max_batch)
        self.truth = truth if truth is not None else TruthLog(config.truth_path)
        self.script = Script.load(config.script) if config.script is not None else None
        self.faults = FaultInjector(config.faults, config.seed)
        self.gate: AdmissionGate | None = None  # see Simulator.held_admission
        self._conn_ids = itertools.count(1)
        # transport -> [connection id, requests served on it]
        self._connections: weakref.WeakKeyDictionary[Any, list[int]] = (
            weakref.WeakKeyDictionary()
        )
        # transport -> when the newest byte read off it reached the server (``bytes_read``)
        self._last_reads: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def bytes_read(self, transport: Any, arrived: float) -> None:
        """Bytes were read off ``transport``'s socket, the newest of them on the host at
        ``arrived`` (``perf_counter`` seconds): the next truth record made on it has the
        newest such time, when the request's last byte reached the server."""
        try:
            self._last_reads[transport] = arrived
        except TypeError:
            pass  # not weakly referable: no mark

    def new_record(self, api: str, model: str, stream: bool, transport: Any,
                   kind: str = "http") -> TruthRecord:
        """A truth record for a request whose body was just received."""
        rec = TruthRecord(request_id=f"req_{uuid.uuid4().hex[:24]}", api=api, model=model,
                          stream=stream, transport=kind, rtt_s=self.config.rtt_ms / 1000.0)
        rec.mark("started_at")
        rec.fault_delay_s = 0.0
        entry = None
        if transport is not None:
            try:
                rec.received_at_mono = self._last_reads.pop(transport, None)
                entry = self._connections.get(transport)
                if entry is None:
                    entry = self._connections[transport] = [next(self._conn_ids), 0]
            except TypeError:
                entry = None
        if entry is None:
            entry = [next(self._conn_ids), 0]
        entry[1] += 1
        rec.connection_id = entry[0]
        rec.new_connection = entry[1] == 1
        return rec

    def turn_for(self, model: str, assistant_turns: int) -> dict[str, Any] | None:
        """The script turn for this request, if a script is loaded."""
        if self.script is None:
            return None
        return self.script.turn(model, assistant_turns)
