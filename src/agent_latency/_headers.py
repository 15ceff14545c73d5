"""One response header by name, read the cheap way from the clients' own header objects."""

from __future__ import annotations

from typing import Any

__all__ = ["header_values"]


def header_values(headers: Any, names: tuple[bytes, ...]) -> list[str | None]:
    """``headers.get(name)`` for each of ``names`` (lower case, ASCII, as bytes), in one
    pass.

    httpx's and httpx2's ``Headers.get`` answers an absent name by raising and catching a
    ``KeyError`` in Python (~8,000 instructions; a plain call asks for three absent ones):
    their rows (``_list``: raw name, lower-case name, value, as bytes) are scanned once
    instead, and an ASCII value decoded as they would.  Any other mapping, or a value that
    is not ASCII (they pick its encoding from all the values), is asked through ``get``.
    Loops, not comprehensions: each of those is a Python call of its own before 3.12.
    """
    found: list[Any] = [None] * len(names)
    rows = getattr(headers, "_list", None)
    if type(rows) is not list:
        for i, name in enumerate(names):
            found[i] = headers.get(name.decode("ascii"))
        return found
    for row in rows:
        key = row[1]
        if key in names:
            i = names.index(key)
            # (a name sent more than once: its values joined with ", ", as theirs are)
            found[i] = row[2] if found[i] is None else found[i] + b", " + row[2]
    for i, value in enumerate(found):
        if value is not None:
            found[i] = (value.decode("ascii") if value.isascii()
                        else headers.get(names[i].decode("ascii")))
    return found
