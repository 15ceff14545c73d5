"""An OpenAI-, Anthropic- and Gemini-compatible LLM server that knows the truth.

It sleeps ``input_tokens / prefill_tps`` before the first token, emits output at
``output_tps`` on absolute deadlines, can add network delay and faults, and logs one
ground-truth record per request. Run it with ``agent-latency simulate`` (:func:`main`),
in a background thread (:class:`Simulator`) or a child process (:class:`SimulatorProcess`).
See docs/simulator.md.
"""

from __future__ import annotations

from ._cli import build_parser, config_from_args, config_to_argv, main
from ._config import SimulatorConfig, is_loopback
from ._content import count_input_tokens
from ._faults import KINDS as FAULT_KINDS
from ._faults import Fault
from ._kernel_delay import KernelDelay
from ._kernel_delay import unavailable_reason as kernel_delay_unavailable
from ._process import SimulatorProcess
from ._proxy import DelayProxy
from ._runner import RunningServer, Simulator, start_server
from ._script import Script
from ._truth import TruthLog, TruthRecord

__all__ = [
    "DelayProxy",
    "FAULT_KINDS",
    "Fault",
    "KernelDelay",
    "RunningServer",
    "Script",
    "Simulator",
    "SimulatorConfig",
    "SimulatorProcess",
    "TruthLog",
    "TruthRecord",
    "build_parser",
    "config_from_args",
    "config_to_argv",
    "count_input_tokens",
    "is_loopback",
    "kernel_delay_unavailable",
    "main",
    "start_server",
]
