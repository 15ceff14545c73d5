"""What a command's task is called when nobody named it: a leaf the launcher imports
without the SDK."""

from __future__ import annotations

import os


def default_name(cmd: list[str]) -> str:
    """``python agent.py`` -> ``agent``; ``python -m pkg.main`` -> ``pkg.main``;
    ``tool`` -> ``tool``."""
    base = os.path.basename(cmd[0])
    if base.startswith("python") or base in {"pypy", "pypy3"}:
        args = cmd[1:]
        while args:
            arg = args.pop(0)
            if arg == "-m" and args:
                return args[0]
            if arg == "-c":
                return "python -c"
            if arg in {"-W", "-X", "-Q"}:
                args[:1] = []
                continue
            if arg.startswith("-"):
                continue
            stem = os.path.basename(arg)
            return stem[:-3] if stem.endswith(".py") else stem
        return base
    return base
