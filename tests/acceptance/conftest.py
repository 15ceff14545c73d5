"""Simulator processes for the acceptance tests, one per script, shared by a module."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from agent_harness import SCRIPTS, Simulator, run_simulator


@pytest.fixture(scope="module")
def simulators(tmp_path_factory) -> Iterator[Callable[[str], Simulator]]:
    """``simulators("x.json")``: the module's simulator running ``scripts/x.json``, started on
    first use; all of them stop when the module is done."""
    started: dict[str, Simulator] = {}
    with ExitStack() as stack:
        def get(script: str) -> Simulator:
            if script not in started:
                truth = tmp_path_factory.mktemp("simulator") / "truth.jsonl"
                started[script] = stack.enter_context(run_simulator(SCRIPTS / script, truth))
            return started[script]

        yield get
