"""A stream still open when its task ends: ended there at its last chunk, counted in that
task, marked abandoned; chunks read later never count twice; a stream dropped before its
first token is freed without a garbage collection."""

from __future__ import annotations

import gc
import logging
import threading

import openai
import pytest
from llm_helpers import llm_spans

import agent_latency
from agent_latency import semconv

MESSAGES = [{"role": "user", "content": "hello " * 50}]


@pytest.fixture
def client(sim):
    c = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
    yield c
    c.close()


def _stream(client, tokens=16):
    return client.chat.completions.create(model="sim-a", messages=MESSAGES, stream=True,
                                          stream_options={"include_usage": True},
                                          max_tokens=tokens)


def _task(otel, name):
    return otel.span(f"invoke_agent {name}")


def _counted_in(otel, name):
    task = _task(otel, name)
    (call,) = llm_spans(otel)
    assert call.parent.span_id == task.context.span_id
    assert call.end_time <= task.end_time  # ended inside the task
    return task.attributes, call.attributes


class TestStreamOutlivesTask:
    """The task's end ends the calls it holds, once."""

    def test_break_after_five_chunks_counts(self, otel, client):
        with agent_latency.task("breaks"):
            stream = _stream(client)
            for i, _chunk in enumerate(stream):
                if i == 5:
                    break
        task, call = _counted_in(otel, "breaks")
        assert task[semconv.budget_count("llm_calls")] == 1
        assert call[semconv.LLM_ABANDONED] is True
        assert call[semconv.LLM_CHUNKS] == 6
        # The call's time is the task's LLM time, not "other": on a loaded machine the five
        # chunks may arrive in one read, so prefill and network hold it rather than output.
        llm_time = sum(task[semconv.budget_busy(c)]
                       for c in ("output_generation", "prefill", "network_overhead"))
        assert llm_time > 0
        stream.close()
        assert len(llm_spans(otel)) == 1

    def test_raise_inside_the_loop_counts(self, otel, client):
        with pytest.raises(ValueError, match="parse error"), agent_latency.task("raises"):
            stream = _stream(client)
            for i, _chunk in enumerate(stream):
                if i == 3:
                    raise ValueError("parse error")
        task, call = _counted_in(otel, "raises")
        assert task[semconv.budget_count("llm_calls")] == 1
        assert call[semconv.LLM_ABANDONED] is True
        del stream

    def test_chunks_read_after_the_task_are_noted_not_counted(self, otel, client, caplog):
        with agent_latency.task("early"):
            stream = _stream(client)
            first = next(iter(stream))
        assert first is not None
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            rest = list(stream)  # the program reads on: its chunks are its own
        assert len(rest) > 5
        task, call = _counted_in(otel, "early")
        assert task[semconv.budget_count("llm_calls")] == 1
        assert call[semconv.LLM_CHUNKS] == 1
        assert len(llm_spans(otel)) == 1
        assert any("read after its task ended" in r.getMessage() for r in caplog.records)

    def test_a_stream_finished_inside_the_task_is_not_marked(self, otel, client):
        with agent_latency.task("whole"):
            for _chunk in _stream(client):
                pass
        _task_attrs, call = _counted_in(otel, "whole")
        assert semconv.LLM_ABANDONED not in call


class TestNoReferenceCycle:
    """A stream dropped before its first token is freed (and its call ended) by reference
    counting alone."""

    def test_dropped_before_the_first_token(self, otel, client):
        gc.collect()
        gc.disable()
        try:
            def read_role_chunk_then_fail():
                stream = _stream(client)
                next(iter(stream))  # the role-only first delta: no token yet
                raise RuntimeError("program gave up")

            with pytest.raises(RuntimeError):
                read_role_chunk_then_fail()
            # Outside any task, so nothing else ends it: only freeing the stream can.
            (call,) = llm_spans(otel)
            assert call.end_time is not None
        finally:
            gc.enable()


class TestCollectedUnderALock:
    """A stream freed by a garbage collection that began under the SDK's own lock ends at the
    next safe point, not inside the collection (where ending its span waited on that lock
    for ever: seen as a hung suite when a collection ran inside ``get_tracer``)."""

    def test_collection_inside_get_tracer(self, otel, client):
        from agent_latency import _scope

        lock = getattr(otel.provider, "_tracers_lock", None)
        if lock is None:
            pytest.skip("this SDK's TracerProvider builds tracers without a lock")
        stream = _stream(client)
        it = iter(stream)
        next(it)
        next(it)
        cycle: list = [stream]
        cycle.append(cycle)  # only a collection frees it
        del stream, it, cycle
        _scope._tracer_cache[0] = None  # the next span asks the provider for a tracer
        collected = threading.Event()

        def collect_holding_the_lock() -> None:
            with lock:  # as get_tracer holds it when its allocations start a collection
                gc.collect()
            collected.set()

        worker = threading.Thread(target=collect_holding_the_lock, daemon=True)
        worker.start()
        assert collected.wait(10), "the collection waited on the SDK's lock"
        assert llm_spans(otel) == []  # not ended inside the collection
        with agent_latency.task("next"):  # a safe point
            pass
        (call,) = llm_spans(otel)
        assert call.attributes[semconv.LLM_CHUNKS] == 2
