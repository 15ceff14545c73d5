"""The commands' ``--help`` text: descriptions wrapped to the width of the rest.

The parsers keep their epilogs as written (``RawDescriptionHelpFormatter``: example
command lines must not be re-flowed), which also keeps the description as written; a
description given as one long string is wrapped here instead, paragraph by paragraph.
"""

from __future__ import annotations

import textwrap

#: Columns of a wrapped description: the width of argparse's own option column text.
WIDTH = 88


def wrapped(text: str) -> str:
    """``text`` with each paragraph (blank-line separated) filled to :data:`WIDTH`."""
    return "\n\n".join(textwrap.fill(" ".join(paragraph.split()), WIDTH,
                                     break_on_hyphens=False, break_long_words=False)
                       for paragraph in text.split("\n\n"))
