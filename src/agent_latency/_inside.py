"""``agent-latency run``'s side inside the program: the bootstrap ``sitecustomize`` calls
:func:`bootstrap` with the run spec, which instruments the program and opens its process task.

Imported only under ``run``, at interpreter start-up: what it imports is what it needs.
"""

from __future__ import annotations

import json
import os
import time

from . import semconv
from ._import_times import IMPORTS, startup_attributes
from ._process import open_process_task, process_name


def bootstrap(spec_text: str) -> None:
    """Called by the bootstrap ``sitecustomize`` with ``AGENT_LATENCY_RUN``'s value."""
    IMPORTS.install()  # from here on imports are timed; before, interpreter start-up
    spec = json.loads(spec_text)
    child = int(spec.get("depth", 0)) > 0
    if spec.get("children"):
        # Children inherit the bootstrap, marked as children: no summary line of theirs.
        os.environ[semconv.ENV_RUN] = json.dumps({**spec, "depth": int(spec.get("depth", 0)) + 1},
                                                 separators=(",", ":"))
    # Imported once imports are timed: set-up's own imports count as the program's start-up.
    from . import configure
    from .configure import instrument

    # The service is the run's (children under --children included: one service, so one
    # host's spans are never compared for clock skew), unless OTEL_* names one.
    configure.default_service_name = str(spec.get("name") or "") or None
    # Our own process task below, not instrument()'s implicit one.
    if child:
        name = process_name()
        start_ns = time.time_ns()
        if not instrument(summary=False, process_task=False):
            return
    else:
        name = str(spec.get("name") or "python")
        start_ns = int(spec.get("start_ns") or time.time_ns())
        if not instrument(summary=True, process_task=False):
            return
    startup = startup_attributes(start_ns) if not child else {}
    open_process_task(name, start_ns, {semconv.RUN_TASK: True, **startup})
