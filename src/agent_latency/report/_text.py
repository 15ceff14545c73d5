"""Untrusted text made safe to show (``_safe_text``), in the report's pages and lines.

Markup is not this module's concern: rich gets names as ``rich.text.Text``, the HTML page
escapes them with Jinja's autoescape.
"""

from __future__ import annotations

from typing import IO, Any

from .._safe_text import safe_text

__all__ = ["html_finalize", "replace_unencodable", "safe_text"]


def html_finalize(value: Any) -> Any:
    """Jinja's ``finalize``: each ``{{ … }}`` string made safe (:func:`safe_text`) before
    autoescape; markup the templates made themselves (macros, ``|safe``) passes as it is."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return safe_text(value)
    return value


def replace_unencodable(stream: IO[str]) -> None:
    """Let ``stream`` write characters its encoding lacks as escapes rather than fail (a
    terminal or pipe that is not UTF-8)."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", "") == "strict":
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a detached or closed stream: nothing to do
            pass
