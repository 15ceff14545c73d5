"""One daemon thread that waits for bytes on watched connections while their readers are away
(a busy event loop, a program working between chunks) and stamps each arrival.

It waits in ``epoll`` without the GIL, edge-triggered: every new segment wakes it, read or not,
and it records the kernel's stamp of the newest queued byte (:meth:`Arrivals.observe`).
While something else holds the GIL (a garbage collection, a C extension) it cannot run and
the kernel coalesces what arrives; those events are then dated from the pace.  So that
such a wait does not stretch back over time when nothing came, it also ticks every
:data:`TICK` seconds while a connection awaits a stream's first token (a wait of unknown
length, the prefill; ``Arrivals.ticked``): each tick it is let run is a quiet moment on
record (:meth:`Arrivals.tick`), and what arrives later is dated after it.

Connections are watched only while an owner asks (a busy client): an idle watcher blocks
without a timeout and costs nothing; a watched arrival costs about ten microseconds of this
thread.  A tick takes the GIL from a program busy in Python at that moment (one switch
for all connections together: 1 to 4 % of such a program's time, measured, while a first
token is awaited); a program waiting for its bytes does not hold it.  Under gevent's monkey
patching, or where ``epoll`` is missing, nothing is watched (the readers' own observations
remain).
"""

from __future__ import annotations

import os
import select
import sys
import threading
from time import perf_counter
from typing import Any

from ..._log import internal_error, logger
from ._arrivals import Arrivals

_EPOLLIN = getattr(select, "EPOLLIN", 0)
_EPOLLERR = getattr(select, "EPOLLERR", 0)
_EPOLL_FLAGS = _EPOLLIN | getattr(select, "EPOLLET", 0)
#: Seconds between the watcher's quiet ticks: the GIL's switch interval, the finest a thread
#: that wants the GIL is let run anyway (at 10 and 20 ms a first token held in C code was
#: dated 5 to 7 ms off in 2 of 12 runs; at 5 ms, in none).
TICK = 0.005


def _threads_are_greenlets() -> bool:
    gevent_monkey = sys.modules.get("gevent.monkey")
    if gevent_monkey is None:
        return False
    try:
        return bool(gevent_monkey.is_module_patched("threading"))
    except Exception:  # noqa: BLE001
        return True


class Watcher:
    """The watching thread and the connections it watches (by file descriptor)."""

    __slots__ = ("_epoll", "_lock", "_stop", "_thread", "_wake", "_watched", "available")

    def __init__(self) -> None:
        # Reentrant: a collection's callback (``_pauses``) may ask for a watch while this
        # thread is inside one.
        self._lock = threading.RLock()
        self._epoll: Any = None
        self._thread: threading.Thread | None = None
        self._watched: dict[int, Arrivals] = {}
        # Written when a connection that wants ticks is watched, so that a thread blocked
        # without a timeout starts ticking.
        self._wake: int | None = None
        self._stop = False  # the thread leaves at its next wake (``pause``)
        self.available = hasattr(select, "epoll") and hasattr(os, "eventfd")

    def watch(self, arrivals: Arrivals) -> None:
        """Stamp ``arrivals``' connection's bytes from now on, until :meth:`unwatch`."""
        if not self.available or arrivals.watched:
            return
        with self._lock:
            if self._epoll is None and not self._start():
                return
            fd = arrivals.fd
            try:
                if fd in self._watched:
                    try:
                        self._epoll.modify(fd, _EPOLL_FLAGS)
                    except FileNotFoundError:
                        # The watched socket was closed without ``unwatch`` (the kernel
                        # dropped it from the epoll set) and its number reused: a new one.
                        self._epoll.register(fd, _EPOLL_FLAGS)
                else:
                    self._epoll.register(fd, _EPOLL_FLAGS)
            except OSError:
                return
            self._watched[fd] = arrivals
            arrivals.watched = True
            if arrivals.ticked and self._wake is not None:
                try:
                    os.eventfd_write(self._wake, 1)
                except OSError:
                    pass  # it ticks from its next arrival on

    def unwatch(self, arrivals: Arrivals) -> None:
        """Stop watching ``arrivals``' connection (closing it also stops it)."""
        if not arrivals.watched:
            return
        arrivals.watched = False
        with self._lock:
            fd = arrivals.fd
            if self._watched.get(fd) is arrivals:
                del self._watched[fd]
                try:
                    self._epoll.unregister(fd)
                except (OSError, ValueError):
                    pass  # already closed: the kernel dropped it

    def _start(self) -> bool:
        if _threads_are_greenlets():
            self.available = False
            logger.info("agent-latency: gevent patches threads; arrival times come from the "
                        "readers only")
            return False
        try:
            self._epoll = select.epoll()
            self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._epoll.register(self._wake, _EPOLLIN)
            thread = threading.Thread(target=self._run, name="agent-latency-watcher",
                                      daemon=True)
            thread.start()
        except (OSError, RuntimeError):
            # No thread at interpreter shutdown, or no epoll: the readers' observations remain.
            self.available = False
            if self._epoll is not None:
                self._epoll.close()
                self._epoll = None
            if self._wake is not None:
                os.close(self._wake)
                self._wake = None
            return False
        self._thread = thread
        return True

    @property
    def thread(self) -> threading.Thread | None:
        """The watching thread, once started."""
        return self._thread

    def pause(self, timeout_s: float) -> bool:
        """Stop the thread (for an ``os.fork()``: Python 3.12 warns when it finds other
        threads); what is watched stays registered.  True when it stopped in time."""
        thread = self._thread
        if thread is None or self._wake is None:
            return True
        self._stop = True
        try:
            os.eventfd_write(self._wake, 1)
        except OSError:
            return False
        thread.join(timeout_s)
        return not thread.is_alive()

    def resume(self) -> None:
        """Start the thread again after :meth:`pause`."""
        if not self._stop:
            return
        self._stop = False
        old = self._thread
        if self._epoll is not None and (old is None or not old.is_alive()):
            thread = threading.Thread(target=self._run, name="agent-latency-watcher",
                                      daemon=True)
            thread.start()
            self._thread = thread

    def _run(self) -> None:
        epoll = self._epoll
        watched = self._watched
        wake = self._wake
        next_tick = 0.0
        while True:
            ticked = [each for each in tuple(watched.values()) if each.ticked]
            try:
                events = epoll.poll(max(next_tick - perf_counter(), 0.0) if ticked else -1)
            except InterruptedError:
                continue
            except (OSError, ValueError):
                return  # closed (after a fork, or at exit)
            if ticked and perf_counter() >= next_tick:
                # Each connection's too, when others' arrivals keep waking the thread.
                for each in ticked:
                    try:
                        each.tick()
                    except Exception:  # noqa: BLE001
                        internal_error("net.watcher")
                next_tick = perf_counter() + TICK
            for fd, mask in events:
                if wake is not None and fd == wake:
                    try:
                        os.eventfd_read(wake)
                    except OSError:
                        pass
                    if self._stop:
                        return
                    continue
                arrivals = watched.get(fd)
                if arrivals is None:
                    continue
                try:
                    if mask & _EPOLLERR:
                        arrivals.sent()  # a transmit stamp, or a real error for the reader
                    if mask & _EPOLLIN:
                        arrivals.observe()
                except Exception:  # noqa: BLE001
                    internal_error("net.watcher")

    def after_fork(self) -> None:
        """In a forked child: no thread, a fresh epoll on first use."""
        self._lock = threading.RLock()
        self._epoll = None
        self._thread = None
        self._wake = None
        self._stop = False
        self._watched = {}


WATCHER = Watcher()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCHER.after_fork)
