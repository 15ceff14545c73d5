"""The registry of integrations: one list for instrument() and opentelemetry-instrument."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10: the TOML reader pip carries
    from pip._vendor import tomli as tomllib

from agent_latency.instrumentation import _all
from agent_latency.instrumentation._base import Instrumentor
from agent_latency.instrumentation._registry import ENTRY_POINT_PREFIX, INTEGRATIONS, triggers_of

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _class(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class TestRegistry:
    """Every integration is written once and registered everywhere it is looked up."""

    def test_entry_points_are_the_registry(self) -> None:
        """pyproject's opentelemetry_instrumentor group: set-up plus one per integration."""
        group = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][
            "opentelemetry_instrumentor"]
        assert group.pop("agent_latency") == "agent_latency._instrumentor:AgentLatencyInstrumentor"
        assert group == {f"{ENTRY_POINT_PREFIX}{name}": integration.instrumentor
                         for name, integration in INTEGRATIONS.items()}

    @pytest.mark.parametrize("name", sorted(INTEGRATIONS))
    def test_one_base(self, name: str) -> None:
        """Each instrumentor is the one base's, and finds its own triggers in the registry."""
        cls = _class(INTEGRATIONS[name].instrumentor)
        assert issubclass(cls, Instrumentor)
        assert triggers_of(cls) == INTEGRATIONS[name].triggers

    @pytest.mark.parametrize("name", sorted(n for n in INTEGRATIONS if INTEGRATIONS[n].triggers))
    def test_patched_modules_lie_under_the_triggers(self, name: str) -> None:
        """A table row in a module its triggers do not import would never be patched."""
        cls = _class(INTEGRATIONS[name].instrumentor)
        rows = getattr(cls, "PATCHES", ())
        tops = INTEGRATIONS[name].triggers
        for module, _attribute, _wrapper in rows:
            assert any(module == t or module.startswith(t + ".") for t in tops), (module, tops)

    def test_unknown_target_is_one_clear_error(self) -> None:
        """instrument(targets=[...]) names what it knows."""
        with pytest.raises(ValueError, match="unknown instrumentation target 'nope'; known: "):
            _all.instrument_all(["nope"])


class TestDeferredPatching:
    """The base wraps a library's rows when the library is imported, not before."""

    def test_rows_wait_for_the_import(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      ) -> None:
        """A table for a module not yet imported is applied by its import, and undone."""
        (tmp_path / "fake_llm_sdk.py").write_text("def create(x):\n    return x\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        calls: list[Any] = []

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            calls.append(args)
            return wrapped(*args, **kwargs)

        class FakeInstrumentor(Instrumentor):
            def patches(self) -> list[Any]:
                return [("fake_llm_sdk", "create", wrapper)]

        from agent_latency.instrumentation import _registry

        monkeypatch.setitem(_registry.INTEGRATIONS, "fake", _registry.Integration(
            f"{__name__}:FakeInstrumentor", ("fake_llm_sdk",)))
        FakeInstrumentor.__module__, FakeInstrumentor.__qualname__ = __name__, "FakeInstrumentor"
        instrumentor = FakeInstrumentor()
        instrumentor.instrument()
        try:
            assert "fake_llm_sdk" not in sys.modules
            import fake_llm_sdk  # type: ignore[import-not-found]

            assert fake_llm_sdk.create(1) == 1
            assert calls == [(1,)]
        finally:
            instrumentor.uninstrument()
            sys.modules.pop("fake_llm_sdk", None)
        assert not hasattr(fake_llm_sdk.create, "__wrapped__")


class TestUnderOpentelemetryInstrument:
    """Set-up loads the integrations opentelemetry-instrument will not, and none left out."""

    def test_set_up_loads_what_the_distro_will_not(self, monkeypatch: pytest.MonkeyPatch,
                                                   ) -> None:
        """An install whose metadata has only some entry points still gets the others."""
        from types import SimpleNamespace

        from agent_latency import _instrumentor

        loaded: list[list[str]] = []
        monkeypatch.setattr(_instrumentor, "instrument",
                            lambda **kwargs: loaded.append(kwargs["targets"]))
        monkeypatch.setattr(_instrumentor, "entry_points", lambda group: [
            SimpleNamespace(name="agent_latency"), SimpleNamespace(name="agent_latency_openai")])
        monkeypatch.setenv("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "agent_latency_gevent")
        _instrumentor.AgentLatencyInstrumentor()._instrument()
        assert loaded == [[name for name in INTEGRATIONS if name not in ("openai", "gevent")]]
