"""The run-as-task helper every agent framework instrumentation shares."""

from __future__ import annotations

import pytest
from opentelemetry.trace import StatusCode

from agent_latency._scope import in_task
from agent_latency.instrumentation.tools._frameworks import call_as_task


def _as_task(name: str, func, *args):  # type: ignore[no-untyped-def]
    return call_as_task(lambda: name, func, args, {})


class TestCallAsTask:
    """A run is one task; a run inside a run adds none; a generator's task lasts with it."""

    def test_run_inside_a_run_is_one_task(self, otel):
        assert _as_task("outer", lambda: _as_task("inner", lambda: in_task())) is True
        assert [s.name for s in otel.spans()] == ["invoke_agent outer"]

    def test_generator_keeps_its_return_value_and_ends_its_task(self, otel):
        def steps():
            yield in_task()
            yield in_task()
            return "final"

        gen = _as_task("streamed", steps)
        assert not otel.spans()
        seen = []
        try:
            while True:
                seen.append(next(gen))
                seen.append(in_task())  # the caller, between steps
        except StopIteration as stop:
            assert stop.value == "final"
        assert seen == [True, False, True, False]
        assert otel.span("invoke_agent streamed").status.status_code is StatusCode.UNSET

    def test_generator_that_fails_ends_its_task_with_the_error(self, otel):
        def steps():
            yield 1
            raise ValueError("bad step")

        gen = _as_task("streamed", steps)
        assert next(gen) == 1
        with pytest.raises(ValueError, match="bad step"):
            next(gen)
        task = otel.span("invoke_agent streamed")
        assert task.status.status_code is StatusCode.ERROR
        assert task.attributes["error.type"] == "ValueError"
