"""A stream still open when its task ends: ended there at its last chunk, counted in that
task, marked abandoned; chunks read later never count twice; a stream dropped before its
first token is freed without a garbage collection."""

from __future__ import annotations

import gc
import logging
import threading
import time

import anthropic
import openai
import pytest
from llm_helpers import llm_spans

import agent_latency
from agent_latency import semconv
from agent_latency.simulator import SimulatorConfig, SimulatorProcess

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


# Ten chunks take 0.1 s at this pace: a call ended at its hand-over instead of its tenth
# chunk loses that much, far more than any slack below.
PACED = SimulatorConfig(prefill_tps=20000.0, output_tps=100.0, default_output_tokens=40)
LEFT_AT = 10


@pytest.fixture(scope="module")
def paced():
    with SimulatorProcess(PACED) as server:
        yield server


def _chat(base_url):
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test", max_retries=0)
    return client, client.chat.completions.create(model="sim-a", messages=MESSAGES,
                                                  stream=True, max_tokens=40)


def _responses(base_url):
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test", max_retries=0)
    return client, client.responses.create(model="sim-a", input="hello " * 50, stream=True,
                                           max_output_tokens=40)


def _messages(base_url):
    client = anthropic.Anthropic(base_url=base_url, api_key="sk-test", max_retries=0)
    return client, client.messages.create(model="sim-c", max_tokens=40, messages=MESSAGES,
                                          stream=True)


def _assert_ends_at_last_read(otel, read_ns: int) -> None:
    (call,) = llm_spans(otel)
    attrs = call.attributes
    assert attrs[semconv.LLM_ABANDONED] is True
    # The span ends at the last chunk the program read (taken just before ``read_ns``),
    # not at the hand-over of the stream, 0.1 s earlier.
    assert call.end_time >= read_ns - 20_000_000
    assert call.end_time <= read_ns + 1_000_000
    # So its time is the model's, not the task's "other", and its first token is where it
    # was (before the fix: output 0.00 and a first token at the hand-over).
    assert attrs[semconv.LLM_OUTPUT_GENERATION] > 0.04
    assert attrs[semconv.LLM_TTFT] < (call.end_time - call.start_time) / 1e9 - 0.04
    task = _task(otel, "left").attributes
    assert task[semconv.budget_busy("output_generation")] > 0.04


class TestLeftEarlyEndsAtTheLastChunkRead:
    """A stream left early (``break``, a raise in the loop) and ended by its task's end is
    booked up to the last chunk read: prefill and output, not other."""

    @pytest.mark.parametrize("open_stream", [_chat, _responses, _messages],
                             ids=["chat", "responses", "anthropic"])
    # quiet: the paced chunks must reach the client apart, which a busy machine can merge
    # into one read (make test runs it alone).
    @pytest.mark.quiet
    def test_break(self, otel, paced, open_stream):
        client, stream = None, None
        with agent_latency.task("left"):
            client, stream = open_stream(paced.base_url)
            outputs = 0
            for chunk in stream:
                outputs += _carries_output(chunk)
                if outputs == LEFT_AT:
                    read_ns = time.time_ns()
                    break
        _assert_ends_at_last_read(otel, read_ns)
        stream.close()
        client.close()

    def test_raise_inside_the_loop(self, otel, paced):
        client = None
        with pytest.raises(ValueError, match="bad chunk"), agent_latency.task("left"):
            client, stream = _chat(paced.base_url)
            for i, _chunk in enumerate(stream):
                if i == LEFT_AT:
                    read_ns = time.time_ns()
                    raise ValueError("bad chunk")
        _assert_ends_at_last_read(otel, read_ns)
        del stream
        client.close()

    async def test_async_break(self, otel, paced):
        client = openai.AsyncOpenAI(base_url=paced.base_url + "/v1", api_key="sk-test",
                                    max_retries=0)
        with agent_latency.task("left"):
            stream = await client.chat.completions.create(
                model="sim-a", messages=MESSAGES, stream=True, max_tokens=40)
            i = 0
            async for _chunk in stream:
                if i == LEFT_AT:
                    read_ns = time.time_ns()
                    break
                i += 1
        _assert_ends_at_last_read(otel, read_ns)
        await stream.close()
        await client.close()


def _carries_output(chunk) -> int:
    kind = getattr(chunk, "type", "")
    if kind in ("response.output_text.delta", "content_block_delta"):
        return 1
    choices = getattr(chunk, "choices", None)
    return int(bool(choices and choices[0].delta.content))


class TestLeftBeforeTheFirstToken:
    """A stream left before its first output token is a measured wait for that token (its
    prefill), never labelled "not split: non-streamed"."""

    def test_role_chunk_only(self, otel, paced):
        client = openai.OpenAI(base_url=paced.base_url + "/v1", api_key="sk-test",
                               max_retries=0)
        with agent_latency.task("left"):
            stream = client.chat.completions.create(model="sim-a", messages=MESSAGES,
                                                    stream=True, max_tokens=40)
            next(iter(stream))  # the role-only first delta
            time.sleep(0.05)  # the program works on before it gives up
        (call,) = llm_spans(otel)
        task = _task(otel, "left").attributes
        assert call.attributes[semconv.LLM_TIMING_SOURCE] == semconv.SOURCE_MEASURED
        assert task.get(semconv.budget_count("not_split_calls"), 0) == 0
        stream.close()
        client.close()
