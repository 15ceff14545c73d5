"""One response header by name, read the cheap way from the clients' own header objects."""

from __future__ import annotations

from typing import Any

__all__ = ["header"]


def header(headers: Any, name: str) -> str | None:
    """``headers.get(name)``, ``name`` in lower case.

    httpx's and httpx2's ``Headers.get`` answers an absent name by raising and catching a
    ``KeyError`` in Python (~8,000 instructions; a plain call asks for two absent ones): their
    rows (``_list``: raw name, lower-case name, value, as bytes) are scanned instead, and an
    ASCII value decoded as they would.  Any other mapping, or a value that is not ASCII (they
    pick its encoding from all the values), is asked through ``get``.
    """
    rows = getattr(headers, "_list", None)
    if type(rows) is not list:
        return headers.get(name)
    key = name.encode("ascii")
    values = [row[2] for row in rows if row[1] == key]
    if not values:
        return None
    # (a name sent more than once: its values joined with ", ", as theirs are)
    value = values[0] if len(values) == 1 else b", ".join(values)
    return value.decode("ascii") if value.isascii() else headers.get(name)
