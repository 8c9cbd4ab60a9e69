"""The printer's short cuts give go-yaml's answers: a string of printable ASCII lines is
analysed at once (``_Scalar._ascii``) with the flags the character loop gives, and a
string ``_SIMPLE`` matches is one the loop finds plain. Checked over every short string
of the characters that matter and over seeded random ones."""

from __future__ import annotations

import itertools
import random
import re
import string
from typing import TYPE_CHECKING

from reconciler.manifests import printer

if TYPE_CHECKING:
    import pytest

# The characters whose neighbours decide a style: spaces, breaks, indicators, a letter.
TRICKY = " \n:#-?.!'\"[]{}&*|>%@`,~\tab"


def _flags(s: str) -> tuple[bool, bool, bool, bool]:
    info = printer._Scalar(s)
    return info.block_plain, info.single, info.block, info.multiline


def _samples() -> list[str]:
    short = ["".join(p) for n in range(1, 4) for p in itertools.product(TRICKY, repeat=n)]
    rng = random.Random(20261129)
    pool = string.printable + "é\u2028\x85\r"
    longer = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(20000)]
    prose = ["description: a VM", "1.5Gi", "kubevirt.io/os", "- item", "a #b", "a: b", "ends:", "x\n#y"]
    return short + longer + prose


def test_the_ascii_analysis_gives_the_loop_s_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = _samples()
    fast = [_flags(s) for s in samples]
    assert any(printer._ASCII.match(s) for s in samples)
    monkeypatch.setattr(printer, "_ASCII", re.compile(r"(?!)"))  # the loop for every string
    slow = [_flags(s) for s in samples]
    assert [s for s, a, b in zip(samples, fast, slow, strict=True) if a != b] == []


def test_a_simple_string_is_plain_to_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(printer, "_ASCII", re.compile(r"(?!)"))
    simple = [s for s in _samples() if printer._SIMPLE.match(s)]
    assert len(simple) > 100
    assert [s for s in simple if not printer._Scalar(s).block_plain] == []
