"""Instructions the sync stream proxy adds per chunk, alone, counted by callgrind.

``bench_llm_instructions.py`` measures the proxy inside the real openai SDK over a socket,
where the per-chunk slope moves between runs by more than the proxy costs.  This one takes
the proxy alone: a plain generator of ``--n`` chunk objects shaped like openai's chat chunks
(a content delta each), read by a ``for`` loop bare and then through the proxy's per-chunk
path with the OpenAI chat endpoint's real ``observe``.  No SDK, no wire, no other thread:
the same count on every run.  Printed: instructions per chunk, bare and through the proxy,
and their difference.

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

_KINDS = ("bare", "proxy")


def worker(n: int) -> None:
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

    _wire.first_output = lambda chunks: None  # no wire here: nothing to stop following

    def source() -> Any:
        for _ in range(n):
            yield chunk

    def bare() -> None:
        for _ in source():
            pass

    def proxy() -> None:
        for _ in _stream._SyncChunks(Call(), source().__next__):
            pass

    for run in (bare, proxy):  # first use: imports, caches, specialisation
        run()
    callgrind.dump("warm")
    for kind, run in zip(_KINDS, (bare, proxy), strict=True):
        run()
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
    bare, proxy = (counts[kind] / args.n for kind in _KINDS)
    print(f"instructions per chunk (callgrind, {args.n:,} chunks): bare loop {bare:,.0f}, "
          f"through the proxy {proxy:,.0f}: the proxy adds {proxy - bare:+,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
