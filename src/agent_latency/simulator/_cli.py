"""``agent-latency simulate``: parse arguments, serve until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from .._help import wrapped
from ._config import SimulatorConfig
from ._runner import start_server

PROG = "agent-latency simulate"


def build_parser() -> argparse.ArgumentParser:
    """The simulator's argument parser."""
    p = argparse.ArgumentParser(
        prog=PROG, description=wrapped(
            "OpenAI-, Anthropic- and Gemini-compatible LLM server with known prefill time, "
            "sampling speed and network delay, logging the ground truth."),
        epilog="examples:\n"
               "  agent-latency simulate --output-tps 150 --prefill-tps 4000\n"
               "  agent-latency simulate --port 0 --rtt-ms 40 --truth truth.jsonl\n"
               "  agent-latency simulate --fault rate_limit:p=0.1 --server-timing",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="listen address, loopback only "
                   "unless --allow-remote (default %(default)s)")
    p.add_argument("--port", type=int, default=8000,
                   help="listen port; 0 picks a free one (default %(default)s)")
    p.add_argument("--prefill-tps", type=float, default=5000.0,
                   help="prefill tokens/s (default %(default)g)")
    p.add_argument("--output-tps", type=float, default=200.0,
                   help="output tokens/s per stream (default %(default)g)")
    p.add_argument("--queue-ms", type=float, default=0.0, help="fixed queue time per request, in "
                   "milliseconds (default %(default)g)")
    p.add_argument("--jitter", type=float, default=0.0,
                   help="relative spread of each inter-token gap, e.g. 0.1 = ±10%% "
                   "(default %(default)g)")
    p.add_argument("--tokens-per-chunk", type=int, default=1,
                   help="output tokens per streamed chunk (default %(default)s)")
    p.add_argument("--rtt-ms", type=float, default=0.0,
                   help="network round trip added by a delaying proxy, half each way, in "
                   "milliseconds (default %(default)g)")
    p.add_argument("--no-connect-penalty", action="store_true",
                   help="with --rtt-ms: do not charge new connections the handshake's RTT")
    p.add_argument("--kernel-delay", action="store_true",
                   help="with --rtt-ms: delay packets in the kernel (NFQUEUE; root only)")
    p.add_argument("--max-batch", type=int, default=64,
                   help="concurrent decode streams (default %(default)s)")
    p.add_argument("--output-tokens", type=int, default=64,
                   help="filler tokens per answer when no script turn says otherwise "
                   "(default %(default)s)")
    p.add_argument("--model", default="sim-model",
                   help="model name listed by /v1/models (default %(default)s)")
    p.add_argument("--script", help="JSON script of turns per model (docs/simulator.md; default: "
                   "none, every answer is filler)")
    p.add_argument("--truth", help="append one JSON line of ground truth per request to this file "
                   "(default: none)")
    p.add_argument("--server-timing", action="store_true",
                   help="disclose TGI-style timing headers and vLLM-style body metrics")
    p.add_argument("--fault", action="append", default=[], metavar="KIND[:k=v,...]",
                   help="inject a fault: rate_limit|server_error|overloaded|cut|"
                   "slow_headers|malformed, options p=, first=, retry_after=, delay_ms=, after= "
                   "(repeatable; default: none)")
    p.add_argument("--seed", type=int, default=0, help="seed for jitter and fault draws "
                   "(default %(default)s)")
    p.add_argument("--spin-us", type=float, default=1200.0,
                   help="spin this many microseconds before each deadline for sub-ms "
                   "precision (default %(default)g)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow listening on a non-loopback address")
    return p


def config_from_args(ns: argparse.Namespace) -> SimulatorConfig:
    """A :class:`SimulatorConfig` from parsed arguments."""
    return SimulatorConfig(
        host=ns.host, port=ns.port, prefill_tps=ns.prefill_tps, output_tps=ns.output_tps,
        queue_ms=ns.queue_ms, jitter=ns.jitter, tokens_per_chunk=ns.tokens_per_chunk,
        rtt_ms=ns.rtt_ms, script=ns.script, truth_path=ns.truth,
        server_timing=ns.server_timing, faults=tuple(ns.fault), allow_remote=ns.allow_remote,
        max_batch=ns.max_batch, default_output_tokens=ns.output_tokens, seed=ns.seed,
        kernel_delay=ns.kernel_delay, spin_us=ns.spin_us,
        connect_penalty=not ns.no_connect_penalty, model=ns.model)


def config_to_argv(cfg: SimulatorConfig) -> list[str]:
    """Command-line arguments that reproduce ``cfg`` (``script`` must be a path)."""
    argv = ["--host", cfg.host, "--port", str(cfg.port), "--prefill-tps", repr(cfg.prefill_tps),
            "--output-tps", repr(cfg.output_tps), "--queue-ms", repr(cfg.queue_ms),
            "--jitter", repr(cfg.jitter), "--tokens-per-chunk", str(cfg.tokens_per_chunk),
            "--rtt-ms", repr(cfg.rtt_ms), "--max-batch", str(cfg.max_batch),
            "--output-tokens", str(cfg.default_output_tokens), "--model", cfg.model,
            "--seed", str(cfg.seed), "--spin-us", repr(cfg.spin_us)]
    flags: dict[str, Any] = {"--server-timing": cfg.server_timing,
                             "--allow-remote": cfg.allow_remote,
                             "--kernel-delay": cfg.kernel_delay,
                             "--no-connect-penalty": not cfg.connect_penalty}
    argv += [k for k, v in flags.items() if v]
    if cfg.script is not None:
        if isinstance(cfg.script, dict):
            raise ValueError("config_to_argv needs the script as a file path")
        argv += ["--script", str(cfg.script)]
    if cfg.truth_path is not None:
        argv += ["--truth", str(cfg.truth_path)]
    for fault in cfg.faults:
        argv += ["--fault", fault]
    return argv


async def _serve(cfg: SimulatorConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await start_server(cfg)
    # handlers first: whoever reads this line may signal us at once
    print(f"simulator listening on {server.base_url} (prefill {cfg.prefill_tps:g} tok/s, "
          f"output {cfg.output_tps:g} tok/s)", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the simulator until SIGINT/SIGTERM; 2 on a bad argument, 1 if it cannot start."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        cfg = config_from_args(ns)
        cfg.validate()
        if cfg.script is not None:
            # Only with --script.
            from ._script import Script

            Script.load(cfg.script)
    except (ValueError, OSError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(cfg))
    except KeyboardInterrupt:
        pass
    except (OSError, RuntimeError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return 0
