"""Regular expressions that come from input, run in linear time as Go's ``regexp`` runs them.

Input: a pattern's text, from a repository (a SOPS file's ``encrypted_regex``, a
kustomize target's ``name``, an ``images`` entry's name), a ``.sops.yaml`` or a flag.
Output: a ``Pattern`` (``search``, ``match`` at the start, ``fullmatch``), or a
``PatternError`` saying why the text is no pattern (its caller names the file and line,
or the flag). SOPS and kustomize are written in Go, whose regular expressions are RE2's:
the same syntax (no backreferences, no look-around, ``\\z`` but no ``\\Z``), leftmost-first
matching, and a time linear in the text whatever the pattern. Python's backtracking
``re`` never runs such a pattern: ``^(a+)+$`` over thirty ``a``s and a ``!`` would take
minutes there.

``re2`` (Google's bindings) is imported here and nowhere else. Pure; errors are not
logged (RE2's own logging is off).
"""

from __future__ import annotations

from typing import Any

import re2

MAX_PATTERN = 4096  # characters: a pattern longer than this is refused, not compiled
MAX_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern (its default)


class PatternError(ValueError):
    """Why a text is no regular expression (RE2's words, or the length)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Pattern:
    """A compiled pattern from input; matching runs in time linear in the text."""

    __slots__ = ("_re", "text")

    def __init__(self, text: str, compiled: Any) -> None:
        self.text = text
        self._re = compiled

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text`` (Go's ``MatchString``)."""
        return self._re.search(text) is not None

    def match(self, text: str) -> bool:
        """Whether the pattern matches at the start of ``text``."""
        return self._re.match(text) is not None

    def fullmatch(self, text: str) -> bool:
        """Whether the pattern matches all of ``text``."""
        return self._re.fullmatch(text) is not None

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"


def compile_pattern(text: str) -> Pattern:
    """``text`` compiled with Go's (RE2's) syntax; ``PatternError`` when it is none."""
    if not isinstance(text, str):
        raise PatternError(f"a pattern is text, not {type(text).__name__}")
    if len(text) > MAX_PATTERN:
        raise PatternError(f"{len(text)} characters long; at most {MAX_PATTERN} are allowed")
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_MEMORY
    try:
        return Pattern(text, re2.compile(text, options))
    except re2.error as err:
        raise PatternError(_words(err)) from err


def _words(err: Exception) -> str:
    raw = err.args[0] if err.args else ""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    return text or "not a regular expression"


__all__ = ["MAX_PATTERN", "Pattern", "PatternError", "compile_pattern"]
