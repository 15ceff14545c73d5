"""Instructions the sync stream proxy adds per chunk, alone, counted by callgrind.

``bench_llm_instructions.py`` measures the proxy inside the real openai SDK over a socket,
where the per-chunk slope moves between runs by more than the proxy costs.  This one takes
the proxy alone: ``--n`` chunk objects shaped like openai's chat chunks (a content delta
each), read by a ``for`` loop bare and then through the proxy's per-chunk path with the
OpenAI chat endpoint's real ``observe``, from two sources: a generator (an SDK stream's own,
which the proxy reads with its generator hot path) and an iterator class (litellm's stream
wrapper's kind, read through the slots class's ``__next__``).  No SDK, no wire, no other
thread: the same count on every run.  Printed per source: instructions per chunk, bare and
through the proxy, and their difference.

A third source is what the proxy meets in the openai SDK: real ``ChatCompletionChunk``
objects (pydantic's, whose fields CPython 3.11 reads through the type attribute cache), from
a generator read bare through a re-yielding generator, as ``Stream.__iter__`` reads its own
(the layer the proxy takes the place of), against the proxy over the same generator.  Its
difference is the path's own cost in the SDK; what ``bench_llm_instructions.py`` measures
beyond it, the type attribute cache's misses, differs from process to process.

    python benchmarks/bench_stream_proxy_instructions.py [--n 5000]
"""

from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _callgrind as callgrind

_SOURCES = ("generator", "iterator", "sdk")
_KINDS = tuple(f"{way}-{source}" for source in _SOURCES for way in ("bare", "proxy"))


def worker(n: int) -> None:
    from openai.types.chat import ChatCompletionChunk

    from agent_latency.instrumentation.llm import _stream, _wire
    from agent_latency.instrumentation.llm.openai import _chat_observe

    delta = SimpleNamespace(content="x", tool_calls=None, refusal=None)
    chunk = SimpleNamespace(choices=[SimpleNamespace(delta=delta, finish_reason=None)])

    class Call:
        """What the per-chunk path reads of a call: its endpoint, content, end."""

        content = None
        endpoint = SimpleNamespace(observe=_chat_observe)
        stream = None

        def finish(self, *args: Any) -> None:
            pass

    class Chunks:
        """An iterator that is not a generator."""

        def __init__(self) -> None:
            self.left = n

        def __iter__(self) -> Any:
            return self

        def __next__(self) -> Any:
            if not self.left:
                raise StopIteration
            self.left -= 1
            return chunk

    _wire.first_output = lambda chunks: None  # no wire here: nothing to stop following

    def generator() -> Any:
        for _ in range(n):
            yield chunk

    sdk_chunks = [ChatCompletionChunk.model_validate({
        "id": "c", "created": 0, "model": "m", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": f"t{i}"}, "finish_reason": None}]})
        for i in range(64)]

    def sdk_generator() -> Any:
        for i in range(n):
            yield sdk_chunks[i & 63]

    def stream_iter(source: Any) -> Any:  # what ``Stream.__iter__`` is
        for item in source:  # noqa: UP028 - the SDK's own words (``yield from`` runs otherwise)
            yield item

    def read(kind: str) -> None:
        way, source_kind = kind.split("-")
        source = {"generator": generator, "iterator": Chunks, "sdk": sdk_generator}[source_kind]()
        if way == "bare":
            for _ in stream_iter(source) if source_kind == "sdk" else source:
                pass
            return
        state = _stream._SyncChunks(Call(), source.__next__)
        for _ in state if source_kind == "iterator" else _stream._sync_chunks(state):
            pass

    for kind in _KINDS:  # first use: imports, caches, specialisation
        read(kind)
    callgrind.dump("warm")
    for kind in _KINDS:
        read(kind)
        callgrind.dump(kind)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="chunks per run")
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.n)
        return 0
    if not callgrind.available():
        return 1
    counts = callgrind.run(__file__, ["--worker", "--n", str(args.n)], list(_KINDS))
    if counts is None:
        return 1
    print(f"instructions per chunk (callgrind, {args.n:,} chunks)")
    for source in _SOURCES:
        bare, proxy = (counts[f"{way}-{source}"] / args.n for way in ("bare", "proxy"))
        name = {"generator": "a generator", "iterator": "an iterator class",
                "sdk": "openai's chunks, bare through Stream.__iter__'s layer"}[source]
        print(f"  from {name}: "
              f"bare loop {bare:,.0f}, through the proxy {proxy:,.0f}: "
              f"the proxy adds {proxy - bare:+,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
