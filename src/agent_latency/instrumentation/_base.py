"""The one way our instrumentations patch: a declarative table, wrapped once its library is
imported, unwrapped exactly.

An integration is one module with an :class:`Instrumentor` subclass that says:

* ``_instruments``: the versions of the library it supports (``opentelemetry-instrument``
  checks them against what is installed);
* :meth:`~Instrumentor.patches`: ``(module, "Class.method" or "function", wrapper)`` rows;
* ``SHARED``: reference-counted patches it needs while instrumented (the network layer, the
  context carried into threads), applied at once;

and the registry (:mod:`._registry`) says which imports apply it.  The rows are wrapped when
the first trigger is imported (at once when one already is), so instrumenting costs no
library's import time, and unwrapped in reverse on ``uninstrument()``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Collection
from typing import Any, ClassVar

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.instrumentation.utils import unwrap
from wrapt import wrap_function_wrapper

from .._log import logger
from ._imports import when_imported
from ._registry import triggers_of
from ._shared import SharedPatch

#: ``(module, "Class.method" or "function", wrapper)``.
Patch = tuple[str, str, Any]


def importable_now(module_name: str) -> bool:
    """Whether ``module_name`` may be imported for a patch now: it is imported already, or
    its top-level package is and has finished importing.

    A trigger can fire in the middle of another package's import (``requests`` imports
    ``urllib3`` first, whose hook patches ``requests.sessions``).  Importing that package's
    modules then runs them before the package has set itself up: ``requests`` silences
    urllib3's SOCKS ``DependencyWarning`` only after ``import urllib3``, so the program
    would see a warning it never sees alone (an error under ``python -W error``).  Nor is a
    package the program has not imported imported for it.
    """
    if module_name in sys.modules:
        return True
    package = sys.modules.get(module_name.partition(".")[0])
    spec = getattr(package, "__spec__", None)
    return package is not None and not getattr(spec, "_initializing", False)


def patch(rows: list[Patch]) -> list[tuple[Any, str]]:
    """Wrap each row that exists in the installed library; returns what to unwrap."""
    done: list[tuple[Any, str]] = []
    for module_name, attribute, wrapper in rows:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner_name, _, method = attribute.rpartition(".")
        owner = getattr(module, owner_name, None) if owner_name else module
        if owner is None or not hasattr(owner, method):
            logger.debug("agent-latency: %s.%s not found; not wrapped", module_name, attribute)
            continue
        wrap_function_wrapper(owner, method, wrapper)
        done.append((owner, method))
    return done


def unpatch(done: list[tuple[Any, str]]) -> None:
    """Undo :func:`patch`, last wrapped first; what cannot be restored is left."""
    while done:
        owner, method = done.pop()
        try:
            unwrap(owner, method)
        except Exception:  # noqa: BLE001, S112 - restore what can be
            continue


class Instrumentor(BaseInstrumentor):
    """One integration (see the module's docstring); subclasses give ``_instruments``,
    :meth:`patches` and, where they need them, ``SHARED``, :meth:`setup` and
    :meth:`applied`/:meth:`removed` for steps a table cannot say."""

    _instruments: ClassVar[tuple[str, ...]] = ()
    SHARED: ClassVar[tuple[SharedPatch, ...]] = ()

    def instrumentation_dependencies(self) -> Collection[str]:
        return self._instruments

    def setup(self, **kwargs: Any) -> None:
        """Read what ``instrument(**kwargs)`` says, once (not per call)."""

    def patches(self) -> list[Patch]:
        """The rows to wrap once the library is imported."""
        return []

    def applied(self) -> None:
        """Steps after the rows are wrapped (rebinding re-exported names, say)."""

    def removed(self) -> None:
        """Undo :meth:`applied`, before the rows are unwrapped."""

    def _instrument(self, **kwargs: Any) -> None:
        self._active = True
        self._wrapped: list[tuple[Any, str]] = []
        self._applied = False
        self.setup(**kwargs)
        for shared in self.SHARED:
            shared.acquire()
        triggers = triggers_of(type(self))
        if not triggers:
            self._apply()
        for module in triggers:
            when_imported(module, self._apply)

    def _apply(self, _module: Any = None) -> None:
        if not self._active or self._applied:
            return
        self._applied = True
        rows = self.patches()
        self._wrapped = patch([row for row in rows if importable_now(row[0])])
        for row in rows:
            if not importable_now(row[0]):  # wrapped when the program imports it
                when_imported(row[0], lambda _module, row=row: self._apply_later(row))
        self.applied()

    def _apply_later(self, row: Patch) -> None:
        if self._active and self._applied:
            self._wrapped.extend(patch([row]))

    def _uninstrument(self, **kwargs: Any) -> None:
        self._active = False
        if self._applied:
            self.removed()
            unpatch(self._wrapped)
            self._applied = False
        for shared in reversed(self.SHARED):
            shared.release()
