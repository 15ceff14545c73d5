"""Root-only network delay in the kernel: NFQUEUE on loopback, scoped to one TCP port.

This kernel has no ``netem``, so packets are held in user space instead:
``iptables-legacy -I INPUT -i lo -p tcp --dport PORT -j NFQUEUE --queue-num Q
--queue-bypass`` (and ``-I OUTPUT -o lo … --sport PORT``) hands every loopback packet to or
from the simulator's port to queue ``Q``; a :mod:`netfilterqueue` reader thread stamps each
packet on arrival and a release thread accepts it ``R/2`` later, in order. Every phase pays
the delay as on a real network: the SYN and SYN-ACK (so TCP connect takes R), the upload,
the first byte and every chunk; the kernel's own RTT estimate (``TCP_INFO``) sees it too.

Only traffic to or from the simulator's port is queued, so nothing else on the machine is
slowed; running inside a network namespace (``ip netns exec``) isolates it further.
``--queue-bypass`` lets traffic through undelayed if the handler dies; the rules are
removed on stop. Needs root, Debian ``iptables`` (``iptables-legacy``) and the pip package
``netfilterqueue`` (built against Debian ``libnetfilter-queue-dev``).
"""

from __future__ import annotations

import collections
import os
import select
import shutil
import subprocess
import threading
import time
from typing import Any

IPTABLES = "iptables-legacy"


def unavailable_reason() -> str | None:
    """Why kernel delay cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "kernel delay needs root"
    if shutil.which(IPTABLES) is None:
        return f"{IPTABLES} not found (Debian package 'iptables')"
    try:
        import netfilterqueue  # noqa: F401
    except ImportError:
        return "the 'netfilterqueue' pip package is not installed"
    return None


class KernelDelay:
    """Holds packets to/from ``port`` on loopback for ``rtt_s / 2`` each way."""

    __slots__ = ("_cond", "_nfq", "_pending", "_port", "_queue_num", "_rules", "_sender_side",
                 "_stop", "_threads", "half")

    def __init__(self, port: int, rtt_s: float, queue_num: int | None = None,
                 sender_side: bool = False) -> None:
        """``sender_side``: the client's packets are held on OUTPUT instead, after TCP sent
        them and before the device stamps them, as a queue below TCP on the client's host
        (a pacing queue discipline) holds them."""
        self._port = port
        self._sender_side = sender_side
        self.half = rtt_s / 2.0
        self._queue_num = queue_num if queue_num is not None else 1000 + port % 30000
        self._rules: list[list[str]] = []
        self._pending: collections.deque[tuple[float, Any]] = collections.deque()
        self._cond = threading.Condition()
        self._stop = False
        self._threads: list[threading.Thread] = []
        self._nfq: Any = None

    def start(self) -> None:
        """Install the rules and start the reader and release threads."""
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        # Optional (Linux, root, libnetfilter-queue): only in kernel-delay mode.
        from netfilterqueue import NetfilterQueue

        self._nfq = NetfilterQueue()
        self._nfq.bind(self._queue_num, self._on_packet, max_len=65536)
        # Each direction is held where a wire would hold it: after the sender's transmit
        # stamp (loopback takes it as the packet enters the device) and before the
        # receiver's receive stamp (taken as it leaves the device).  The client's packets
        # are held on INPUT, the simulator's on OUTPUT.  Held on OUTPUT too, a request's
        # transmit stamp came R/2 late and the kernel kept the request's next write back
        # until the first was released (TCP small queues).
        client_side = ("OUTPUT", "-o") if self._sender_side else ("INPUT", "-i")
        for (chain, device), flag in ((client_side, "--dport"), (("OUTPUT", "-o"), "--sport")):
            rule = [chain, device, "lo", "-p", "tcp", flag, str(self._port), "-j", "NFQUEUE",
                    "--queue-num", str(self._queue_num), "--queue-bypass"]
            subprocess.run([IPTABLES, "-I", *rule], check=True, capture_output=True)
            self._rules.append(rule)
        for target in (self._read, self._release):
            t = threading.Thread(target=target, name=f"kernel-delay-{target.__name__}",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Remove the rules first (traffic flows again), then stop the threads."""
        for rule in self._rules:
            subprocess.run([IPTABLES, "-D", *rule], check=False, capture_output=True)
        self._rules.clear()
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=5)
        self._threads.clear()
        if self._nfq is not None:
            try:
                self._nfq.unbind()
            except Exception:  # noqa: BLE001, S110 - best effort at shutdown
                pass
            self._nfq = None

    def _on_packet(self, pkt: Any) -> None:
        due = time.perf_counter() + self.half
        with self._cond:
            self._pending.append((due, pkt))
            self._cond.notify()

    def _read(self) -> None:
        # unbind() blocks while run(block=True) sits in recv, so poll and check _stop
        fd = self._nfq.get_fd()
        while not self._stop:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                self._nfq.run(block=False)

    def _release(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if self._stop:
                    for _, pkt in self._pending:
                        pkt.accept()
                    self._pending.clear()
                    return
                due, pkt = self._pending[0]
            wait = due - time.perf_counter()
            if wait > 0.0003:
                time.sleep(wait - 0.0002)
            while time.perf_counter() < due:
                pass
            with self._cond:
                self._pending.popleft()
            pkt.accept()
