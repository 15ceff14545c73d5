"""Untrusted text made safe to show on a terminal.

Names, ids and messages come from programs, trace files and backends, and are whatever
their writer put there.  Shown as they are, a name can drive the terminal (ANSI CSI and OSC
sequences: a window title, a cleared screen, a live hyperlink), reorder the line it sits in
(Unicode bidirectional controls such as U+202E), break a one-line message (a newline), or
stop the program (a lone surrogate, which no encoder accepts).  Every such character is
shown as an escape instead (``\\x1b``, ``\\u202e``, ``\\ud800``); all other text, non-Latin
scripts included, is left as it is.  Used by the live task line and by the report.
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL (ESC and CSI start terminal sequences; CR, LF, TAB break a
# line's layout), the bidirectional controls (marks, embeddings, overrides, isolates),
# the Unicode line and paragraph separators, and lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
    "\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: object) -> str:
    """``text`` as a string with every control, bidirectional control and lone surrogate
    shown as an escape: safe to print on a terminal, one line, encodable as UTF-8."""
    return _UNSAFE.sub(_escape, text if isinstance(text, str) else str(text))


def safe_name(text: object, limit: int) -> str:
    """:func:`safe_text` of ``text``, cut to ``limit`` characters (the last one then ``…``):
    a name that fits in a line, whatever its length."""
    shown = safe_text(text)
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"
