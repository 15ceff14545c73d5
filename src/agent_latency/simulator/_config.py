"""Simulator configuration: one frozen dataclass shared by the CLI, the API and the server."""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from pathlib import Path
from typing import Any

from ._faults import Fault
from ._limits import CONFIG

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


@dataclasses.dataclass(frozen=True)
class SimulatorConfig:
    """How the simulated LLM server behaves.

    Rates are tokens per second. ``queue_ms`` is a fixed wait every request pays before it
    competes for capacity; ``jitter`` is the relative spread (0.1 = ±10 %) of each
    inter-token gap. ``rtt_ms`` puts a delaying TCP proxy in front of the server (half the
    delay each way). ``script`` is a path to a JSON script or an already-loaded dict.
    ``faults`` holds fault specs such as ``"rate_limit:first=1"`` (see docs/simulator.md).
    """

    host: str = "127.0.0.1"
    port: int = 0
    prefill_tps: float = 5000.0
    output_tps: float = 200.0
    queue_ms: float = 0.0
    jitter: float = 0.0
    tokens_per_chunk: int = 1
    rtt_ms: float = 0.0
    script: str | Path | dict[str, Any] | None = None
    truth_path: str | Path | None = None
    server_timing: bool = False
    faults: tuple[str, ...] = ()
    allow_remote: bool = False
    max_batch: int = 64
    default_output_tokens: int = 64
    seed: int = 0
    kernel_delay: bool = False
    spin_us: float = 1200.0
    connect_penalty: bool = True
    model: str = "sim-model"

    def validate(self) -> None:
        """Raise ``ValueError`` with a one-line message when a setting is unusable."""
        for field, (flag, bound) in CONFIG.items():
            bound.check(flag, getattr(self, field))
        if not self.allow_remote and not is_loopback(self.host):
            raise ValueError(
                f"refusing to listen on non-loopback host {self.host!r}; pass --allow-remote"
            )
        if self.kernel_delay and self.rtt_ms <= 0:
            raise ValueError("--kernel-delay needs --rtt-ms > 0")
        for spec in self.faults:
            Fault.parse(spec)
        if self.truth_path is not None:
            _check_appendable(Path(self.truth_path))

    def replace(self, **changes: Any) -> SimulatorConfig:
        """Return a copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


def _check_appendable(path: Path) -> None:
    # found at start-up, not as a traceback after the first request
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ValueError(f"--truth {str(path)!r}: cannot append ({exc.strerror or exc})") from None


def is_loopback(host: str) -> bool:
    """True when ``host`` names only loopback addresses."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
