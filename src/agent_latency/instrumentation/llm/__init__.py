"""The provider-neutral LLM-call core: provider modules only describe endpoints and chunk shapes.

``Endpoint`` says how to read one endpoint's chunks and responses; ``_invoke.call_wrapper``
turns it into a wrapt wrapper for a method or a module-level function (``_stainless`` adds
what the openai and anthropic SDKs share); ``patch``/``unpatch`` apply a provider's table of
``(module, "Class.method" or "function", wrapper)`` (the instrumentation's one base,
``_base.Instrumentor``, wraps them once the library is imported and unwraps them exactly).
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._base import Instrumentor, Patch, patch, unpatch
from .._shared import SharedPatch
from ..net import aiohttp_patch, httpx_send_patch, sockets_patch
from ..protocols import Endpoint, StreamState, int_or_none
from ._call import LLMCall, Settings
from ._info import Info

#: ``(module, "Class.method" or "function", wrapper)``.
Target = Patch


class LLMInstrumentor(Instrumentor):
    """What every LLM provider's instrumentor does: the network layer's patches (reference
    counted, shared with the httpx instrumentor) and the provider's method patches.

    A provider module subclasses it with ``_instruments`` and ``targets()``; nothing else.
    """

    SHARED: ClassVar[tuple[SharedPatch, ...]] = (httpx_send_patch, sockets_patch,
                                                 aiohttp_patch)

    def targets(self, settings: Settings) -> list[Target]:
        """``(module, "Class.method" or "function", wrapper)`` triples to patch."""
        raise NotImplementedError

    def setup(self, **kwargs: Any) -> None:
        # Settings are read here, once: not per call.
        self._settings = Settings.from_instrument_kwargs(kwargs)

    def patches(self) -> list[Patch]:
        return self.targets(self._settings)

    def _uninstrument(self, **kwargs: Any) -> None:
        self._settings.active = False
        super()._uninstrument(**kwargs)


__all__ = ["Endpoint", "Info", "LLMCall", "LLMInstrumentor", "Settings", "StreamState", "Target",
           "int_or_none", "patch", "unpatch"]
