"""The provider-neutral LLM-call core: provider modules only describe endpoints and chunk shapes.

``Endpoint`` says how to read one endpoint's chunks and responses; ``_invoke.call_wrapper``
turns it into a wrapt wrapper for a method or a module-level function (``_stainless`` adds
what the openai and anthropic SDKs share); ``patch``/``unpatch`` apply a provider's table of
``(module, "Class.method" or "function", wrapper)`` with matched wrap and unwrap.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from wrapt import wrap_function_wrapper

from ..._log import logger
from ..net import aiohttp_patch, httpx_send_patch, sockets_patch
from ._call import Endpoint, LLMCall, Settings, StreamState
from ._info import Info

#: ``(module, "Class.method" or "function", wrapper)``.
Target = tuple[str, str, Any]


def patch(targets: list[Target]) -> list[tuple[Any, str]]:
    """Wrap each target that exists in the installed library; returns what to unwrap."""
    done: list[tuple[Any, str]] = []
    for module_name, attribute, wrapper in targets:
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
    """Undo :func:`patch`."""
    from opentelemetry.instrumentation.utils import unwrap

    while done:
        owner, method = done.pop()
        unwrap(owner, method)


def int_or_none(value: Any) -> int | None:
    """``value`` when it is an int (not a bool), else None: usage fields of any shape."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class LLMInstrumentor(BaseInstrumentor):
    """What every LLM provider's instrumentor does: the network patch (reference counted,
    shared with the httpx instrumentor) and the provider's method patches.

    A provider module subclasses it with ``_instruments`` and ``targets()``; nothing else.
    """

    _instruments: tuple[str, ...] = ()

    def instrumentation_dependencies(self) -> Collection[str]:
        return self._instruments

    def targets(self, settings: Settings) -> list[Target]:
        """``(module, "Class.method" or "function", wrapper)`` triples to patch."""
        raise NotImplementedError

    def _instrument(self, **kwargs: Any) -> None:
        # Settings are read here, once: not per call.
        settings = self._settings = Settings.from_instrument_kwargs(kwargs)
        httpx_send_patch.acquire()
        sockets_patch.acquire()
        aiohttp_patch.acquire()
        self._done = patch(self.targets(settings))

    def _uninstrument(self, **kwargs: Any) -> None:
        settings = getattr(self, "_settings", None)
        if settings is not None:
            settings.active = False
        unpatch(getattr(self, "_done", []))
        aiohttp_patch.release()
        sockets_patch.release()
        httpx_send_patch.release()


__all__ = ["Endpoint", "Info", "LLMCall", "LLMInstrumentor", "Settings", "StreamState", "Target",
           "int_or_none", "patch", "unpatch"]
