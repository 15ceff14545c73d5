"""The provider-neutral LLM-call core: provider modules only describe endpoints and chunk shapes.

``Endpoint`` says how to read one endpoint's chunks and responses; ``_invoke``'s
``method_wrapper`` and ``manager_wrapper`` turn it into wrapt wrappers; ``patch``/``unpatch``
apply a provider's table of ``(module, "Class.method", wrapper)`` with matched wrap and unwrap.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from wrapt import wrap_function_wrapper

from ..._log import logger
from . import _network
from ._call import Endpoint, Info, LLMCall

Target = tuple[str, str, Any]


def patch(targets: list[Target]) -> list[tuple[Any, str]]:
    """Wrap each target that exists in the installed SDK; returns what to unwrap."""
    done: list[tuple[Any, str]] = []
    for module_name, attribute, wrapper in targets:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner_name, _, method = attribute.rpartition(".")
        owner = getattr(module, owner_name, None)
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
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class LLMInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """What every LLM provider's instrumentor does: the network patch (reference counted,
    shared with the httpx instrumentor) and the provider's method patches.

    A provider module subclasses it with ``_instruments`` and ``targets()``; nothing else.
    """

    _instruments: tuple[str, ...] = ()

    def instrumentation_dependencies(self) -> Collection[str]:
        return self._instruments

    def targets(self) -> list[Any]:
        """``(module, "Class.method", wrapper)`` triples to patch."""
        raise NotImplementedError

    def _instrument(self, **kwargs: Any) -> None:
        _network.acquire()
        self._done = patch(self.targets())

    def _uninstrument(self, **kwargs: Any) -> None:
        unpatch(getattr(self, "_done", []))
        _network.release()


__all__ = ["Endpoint", "Info", "LLMCall", "LLMInstrumentor", "Target", "int_or_none", "patch",
           "unpatch"]
