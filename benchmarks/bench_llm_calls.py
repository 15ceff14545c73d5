"""Python function calls that LLM instrumentations add to one non-streaming openai call.

callgrind counts instructions but names C functions only (``_PyEval_EvalFrameDefault``
for every line of Python); this names the Python functions.  In one process per library
(against the instruction benchmarks' simulator), after warm-up and with the garbage
collector off, ``sys.setprofile`` counts every Python function entered on the main thread
during ``--n`` plain calls with the library instrumented, then ``--n`` with it
uninstrumented; the difference, per call, is printed by module and by function.  Counts,
not times: the same on an idle and a loaded machine, and (at ~1,600 instructions a Python
call on 3.11) in step with ``bench_llm_instructions.py``'s per-call figure.

``--bytecodes`` counts, instead of calls, the bytecodes each Python function executes
(``sys.settrace`` with opcode events): a function's own work, wherever it is called from,
which a call count cannot weigh (a loop over a response's header rows is one call).

    python benchmarks/bench_llm_calls.py [--n 50] [--libraries agent_latency,official] [--top 40]
    python benchmarks/bench_llm_calls.py --bytecodes [--n 20]

Library names as in ``bench_llm_instructions.py`` (``agent_latency+bare``: phase spans,
``traceparent`` and arrival times off; ``+nophases``, ``+nopropagate``, ``+noarrivals``: one
of them off each, for the price of each).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import re
import subprocess
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _where(filename: str) -> str:
    for marker in ("site-packages/", "/src/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return re.sub(r"^.*/lib/python3\.\d+/", "", filename)  # the standard library


def worker(library: str, url: str, n: int, bytecodes: bool = False) -> dict[str, float]:
    import openai
    from bench_llm_overhead import VARIANTS, _setup

    base, _, via = library.partition("+")
    os.environ["AGENT_LATENCY_ARRIVALS"] = "first"
    os.environ.update(VARIANTS.get(via, {}))
    instrumentor = _setup(base)
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)
    messages = [{"role": "user", "content": "benchmark " * 20}]

    def call() -> None:
        client.chat.completions.create(model="m", messages=messages, max_tokens=20,
                                       temperature=0.0)

    for _ in range(10):
        call()
    gc.collect()
    gc.disable()
    counts: collections.Counter[str] = collections.Counter()

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            counts[f"{_where(code.co_filename)}:{code.co_name}"] += 1

    def trace(frame: Any, event: str, _arg: Any) -> Any:
        if event == "opcode":
            code = frame.f_code
            counts[f"{_where(code.co_filename)}:{code.co_name}"] += 1
        elif event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        return trace

    def batch() -> collections.Counter[str]:
        counts.clear()
        if bytecodes:
            sys.settrace(trace)
        else:
            sys.setprofile(profile)
        try:
            for _ in range(n):
                call()
        finally:
            sys.settrace(None)
            sys.setprofile(None)
        return collections.Counter(counts)

    on = batch()
    if instrumentor is not None:
        instrumentor.uninstrument()
    off = batch()
    on.subtract(off)
    return {name: count / n for name, count in on.items() if count}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="plain calls per batch")
    parser.add_argument("--libraries", default="agent_latency,official")
    parser.add_argument("--top", type=int, default=40, help="functions listed per library")
    parser.add_argument("--bytecodes", action="store_true",
                        help="count the bytecodes each function executes, not the calls")
    parser.add_argument("--worker")
    parser.add_argument("--url")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.url, args.n, args.bytecodes)))
        return 0
    import _callgrind as callgrind

    totals = {}
    with callgrind.simulator() as sim:
        for library in args.libraries.split(","):
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", library, "--url", sim.base_url,
                 "--n", str(args.n), *(["--bytecodes"] if args.bytecodes else [])],
                capture_output=True, text=True, timeout=600,
                check=False)
            if proc.returncode != 0:
                print(f"{library} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                return 1
            added: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
            totals[library] = total = sum(added.values())
            modules: collections.Counter[str] = collections.Counter()
            for name, count in added.items():
                modules["/".join(name.split(":")[0].split("/")[:2])] += count
            unit = "bytecodes" if args.bytecodes else "Python calls"
            print(f"{library}: {total:+.1f} {unit} per plain call")
            print("  by module: " + ", ".join(f"{m} {c:+.1f}" for m, c in
                                              modules.most_common(8)))
            for name, count in sorted(added.items(), key=lambda kv: -kv[1])[:args.top]:
                print(f"  {count:+7.1f}  {name}")
            print()
    if "official" in totals:
        for library, total in totals.items():
            if library != "official":
                print(f"{library} / official: {total / totals['official']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
