"""What the callgrind benchmarks share: reading the totals of their dumps."""

from __future__ import annotations

import glob
import os


def counts(folder: str) -> dict[str, int]:
    """Total instructions per dump in ``folder``, by the tag each dump was triggered with."""
    out = {}
    for path in glob.glob(os.path.join(folder, "cg.*")):
        tag, total = None, None
        with open(path) as f:
            for line in f:
                if line.startswith("desc: Trigger: "):
                    tag = line.rsplit(" ", 1)[-1].strip()
                elif line.startswith(("summary:", "totals:")) and total is None:
                    total = int(line.split()[1])
        if tag and total is not None:
            out[tag] = total
    return out
