"""Patches that several instrumentors need: applied by the first user, removed by the last."""

from __future__ import annotations

import threading
from collections.abc import Callable


class SharedPatch:
    """Reference-counted ``apply``/``remove`` of one set of patches.

    The httpx ``send`` patch is needed by the httpx, openai and anthropic instrumentors, the
    thread-context patch by several tool instrumentors: whichever comes first applies it,
    whichever leaves last removes it.
    """

    __slots__ = ("_apply", "_lock", "_remove", "_users")

    def __init__(self, apply: Callable[[], None], remove: Callable[[], None]) -> None:
        self._apply = apply
        self._remove = remove
        # Re-entrant: applying may import a library whose import hook instruments another
        # target that needs the same patch (the httpx patch imports httpx, whose hook
        # instruments the httpx target); that user only counts, the outer apply patches.
        self._lock = threading.RLock()
        self._users = 0

    @property
    def active(self) -> bool:
        """Whether the patches are in place."""
        return self._users > 0

    def acquire(self) -> None:
        """One more user; the first applies the patches."""
        with self._lock:
            self._users += 1
            if self._users == 1:
                self._apply()

    def release(self) -> None:
        """One user fewer; the last removes the patches (extra releases are ignored)."""
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0:
                self._remove()
