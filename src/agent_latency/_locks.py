"""A lock that a forked child gets anew.

A thread of the parent may hold a lock at the moment of ``fork()``; in the child that
thread does not exist, and the lock would never be released.  Each of our module-level
locks that a child may take is made anew there.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any


class ForkSafeLock:
    """A ``threading.Lock`` (as a context manager) replaced by a new one in a forked child."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)

            def renew() -> None:
                lock = ref()
                if lock is not None:
                    lock._lock = threading.Lock()

            os.register_at_fork(after_in_child=renew)

    def __enter__(self) -> ForkSafeLock:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()
