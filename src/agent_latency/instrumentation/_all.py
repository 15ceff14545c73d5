"""``instrument()``'s loader: each integration of the registry (:mod:`._registry`) is applied
when its library is imported, so a program pays for none it never imports."""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from .._log import logger
from ._imports import when_imported
from ._registry import INTEGRATIONS

if TYPE_CHECKING:  # importing it costs ~40 ms of start-up: only where a target is applied
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

# Bumped by cancel_pending(): hooks registered before it do nothing when they fire.
_generation = 0


def instrument_all(targets: list[str] | None = None) -> list[BaseInstrumentor]:
    """Instrument every known target (or ``targets``) whose library is installed.

    Returns the list of instrumentors applied; targets waiting for their library's import
    are appended to it when they fire.
    """
    done: list[BaseInstrumentor] = []
    names = list(INTEGRATIONS) if targets is None else targets
    for name in names:
        if name not in INTEGRATIONS:
            raise ValueError(f"unknown instrumentation target {name!r}; known: "
                             f"{', '.join(sorted(INTEGRATIONS))}")
    for name in names:
        triggers = INTEGRATIONS[name].triggers
        if name == "subprocess":
            # Its patches come with the first spawn: not loaded at instrument().
            from .tools import _first_spawn

            _first_spawn.defer(lambda: _apply("subprocess", done))
        elif not triggers or any(t in sys.modules for t in triggers):
            _apply(name, done)
        else:  # a library not installed is never imported: its hook never fires
            _defer(name, triggers, done)
    return done


def cancel_pending() -> None:
    """Forget targets still waiting for their library's import."""
    global _generation
    _generation += 1
    # Its patches come with the first spawn: not loaded at instrument().
    from .tools import _first_spawn

    _first_spawn.cancel()


def _defer(name: str, triggers: tuple[str, ...], done: list[BaseInstrumentor]) -> None:
    generation = _generation
    fired = [False]

    def on_import(_module: object) -> None:
        if fired[0] or generation != _generation:
            return
        fired[0] = True
        _apply(name, done)

    for module in triggers:
        when_imported(module, on_import)


# Integrations whose library was imported while one of our own modules was still being
# imported (wrapt imports asyncio as ``_base`` imports it: under gevent nothing imported
# asyncio before): applied again once that outer import is done.
_retry: list[tuple[str, list[BaseInstrumentor]]] = []


def _ours_initializing() -> bool:
    prefix = __name__.rpartition(".")[0] + "."
    return any(getattr(getattr(module, "__spec__", None), "_initializing", False)
               for key, module in tuple(sys.modules.items()) if key.startswith(prefix))


def _apply(name: str, done: list[BaseInstrumentor]) -> None:
    module_name, _, class_name = INTEGRATIONS[name].instrumentor.partition(":")
    try:
        instrumentor = getattr(importlib.import_module(module_name), class_name)()
    except ImportError as exc:
        if _ours_initializing():
            _retry.append((name, done))
            return
        logger.debug("agent-latency: %s not instrumented: %s", name, exc)
        return
    finally:
        while _retry and not _ours_initializing():
            _apply(*_retry.pop())
    if instrumentor.is_instrumented_by_opentelemetry:
        return
    try:
        instrumentor.instrument()
    except Exception:  # noqa: BLE001 - one broken target must not stop the others
        logger.warning("agent-latency: instrumenting %s failed", name, exc_info=True)
        return
    if instrumentor.is_instrumented_by_opentelemetry:
        done.append(instrumentor)
