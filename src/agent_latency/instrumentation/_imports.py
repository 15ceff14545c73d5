"""Patching a library when the program imports it, not before (imports cost start-up time).

A small finder first on ``sys.meta_path`` watches the module names asked for; when one is
imported it lets the other finders find it, runs the module, then calls the hooks.  (wrapt's
post-import hooks do the same, but importing wrapt costs ~20 ms of start-up: it imports
``asyncio`` and ``importlib.metadata``.)
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from .._log import FAULTS, fault, internal_error

_hooks: dict[str, list[Any]] = {}
_lock = threading.RLock()
_finding = threading.local()


def when_imported(module: str, hook: Any) -> None:
    """Call ``hook(module)`` once ``module`` is imported (at once if it already is)."""
    if module in sys.modules:
        hook(sys.modules[module])
        return

    def guarded(mod: Any) -> None:
        try:
            if FAULTS:
                fault(f"patch-on-import {module}")
            hook(mod)
        except Exception:  # noqa: BLE001 - a failed patch must not fail the user's import
            internal_error(f"patch-on-import {module}")

    with _lock:
        _hooks.setdefault(module, []).append(guarded)
        if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _PostImportFinder())
    if module in sys.modules:  # imported by another thread meanwhile
        _fire(module, sys.modules[module])


def _fire(name: str, module: Any) -> None:
    with _lock:
        hooks = _hooks.pop(name, [])
    for hook in hooks:
        hook(module)


class _NotifyingLoader:
    """Runs the real loader, then the hooks; everything else is the real loader's."""

    __slots__ = ("_loader", "_name")

    def __init__(self, name: str, loader: Any) -> None:
        self._name = name
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        # The module's spec points back at the real loader, as if we were never there.
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        _fire(self._name, sys.modules.get(self._name, module))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PostImportFinder:
    """A ``sys.meta_path`` finder that only wraps the loader of watched modules."""

    __slots__ = ()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _hooks:
            return None
        busy = getattr(_finding, "names", None)
        if busy is None:
            busy = _finding.names = set()
        if name in busy:
            return None
        busy.add(name)
        try:
            for finder in sys.meta_path:
                if finder is self or isinstance(finder, _PostImportFinder):
                    continue
                find = getattr(finder, "find_spec", None)
                spec = find(name, path, target) if find is not None else None
                if spec is not None:
                    break
            else:
                return None
        finally:
            busy.discard(name)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _NotifyingLoader(name, spec.loader)
        return spec
