"""Patching a library when the program imports it, not before (imports cost start-up time)."""

from __future__ import annotations

import sys
from typing import Any

from .._log import FAULTS, fault, internal_error


def when_imported(module: str, hook: Any) -> None:
    """Call ``hook(module)`` once ``module`` is imported (at once if it already is)."""
    if module in sys.modules:
        hook(sys.modules[module])
        return
    import wrapt

    def guarded(mod: Any) -> None:
        try:
            if FAULTS:
                fault(f"patch-on-import {module}")
            hook(mod)
        except Exception:  # noqa: BLE001 - a failed patch must not fail the user's import
            internal_error(f"patch-on-import {module}")

    wrapt.register_post_import_hook(guarded, module)


# -- naming -------------------------------------------------------------------------------
