"""Text from a repository made safe to print: terminals and XML comments.

Input: any string a commit controls (file and directory names, VM names, refs).
Output: the same text with nothing a terminal or an XML reader would act on. Pure.
``printable`` turns control and format characters (ESC, CR, bidi overrides, ...)
into Python-style escapes (``\\x1b``), so a file name can neither move the cursor
nor recolour a log. ``xml_comment`` also breaks every ``--`` so that text inside
``<!-- ... -->`` can never end the comment (``a--b`` stays well-formed; a crafted
``--><domain>`` stays comment text).
"""

from __future__ import annotations

import re


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\x1b``, ``\\u202e``)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def xml_comment(text: str) -> str:
    """``text`` fit for the inside of an XML comment: printable, no ``--``, no trailing ``-``."""
    safe = re.sub(r"-(?=-)", "-\\\\", printable(text))
    return safe + " " if safe.endswith("-") else safe
