"""A real browser for the status page: Debian's chromium, driven by Playwright.

Input: nothing (chromium at /usr/bin/chromium, installed by scripts/setup; Playwright's
own browser download is never used). Output: the ``browser`` fixture (one headless
chromium per module), ``free_port`` and ``wait_text`` (seconds until a text shows in the
page's main part; the timeout is a hang guard). Starts a browser process; reaches only
the addresses a test opens.
"""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import HANG_GUARD_S

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, Page

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_text(page: Page, text: str, present: bool = True) -> float:
    """Seconds until ``text`` is (or, ``present=False``, is no longer) in the page's main part."""
    t0 = time.monotonic()
    page.wait_for_function(
        "([t, p]) => document.getElementById('main').textContent.includes(t) === p",
        arg=[text, present],
        timeout=HANG_GUARD_S * 1000,
    )
    return time.monotonic() - t0
