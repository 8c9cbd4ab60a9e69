"""The status page in a real browser (reconciler/daemon/page.py, http.py): Debian's
chromium driven by Playwright, on a `reconciler run` subprocess and test:///default.

Covers: the page shows the applied revision, the host and each VM's run strategy,
power state and sync; a new commit's result appears by itself (the figure is printed;
the wait is only a hang guard); names, messages and paths from a commit (``<script>``,
``<img onerror>``, quotes, an ESC control character in a file name) are shown as text:
no element, no script, no dialog comes of them, the control character is shown escaped;
``/api/status`` is the same data as versioned JSON; when the daemon stops answering the
page says so and picks up again once it is back (a restart of the daemon on the same
state directory and port).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.helpers.browser import browser, free_port, wait_text
from tests.helpers.daemon import HANG_GUARD_S
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Browser, Dialog

    from tests.helpers.daemon import Daemon
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test
__all__ = ["browser"]  # the fixture

HOSTILE = "vms/<img src=x onerror=alert(1)>\"'<script>alert(2)</script>\x1b[31m.yaml"


def test_the_page_follows_commits_and_shows_hostile_text_as_text(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], browser: Browser
) -> None:
    git_repo.write("vms/a.yaml", vm_yaml("page-a"))
    first = git_repo.commit()
    port = free_port()
    args = ("--repo", str(git_repo.path), "--connect", "test:///default", "--listen", f"127.0.0.1:{port}")
    d = start(*args)
    d.wait_applied(first)
    page = browser.new_page()
    dialogs: list[str] = []

    def on_dialog(dlg: Dialog) -> None:
        dialogs.append(dlg.message)
        dlg.dismiss()

    page.on("dialog", on_dialog)
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"http://127.0.0.1:{port}/")
    wait_text(page, first[:12])
    row = page.locator("section.host tr", has_text="page-a")
    assert row.locator("td").all_inner_texts()[:5] == ["page-a", "Always", "running", "Ready", "Synced"]

    git_repo.write("vms/b.yaml", vm_yaml("page-b", strategy="Halted"))
    second = git_repo.commit()
    seen = wait_text(page, "page-b")
    print(f"\ncommit -> shown on the status page: {seen:.2f} s")
    wait_text(page, second[:12])

    git_repo.write(HOSTILE, "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nspec: [\n")
    broken = git_repo.commit()
    wait_text(page, "BuildFailed")
    shown = page.locator("#main").inner_text()
    assert "<img src=x onerror=alert(1)>\"'<script>alert(2)</script>\\x1b[31m.yaml" in shown
    assert "\x1b" not in shown
    assert page.locator("#main img").count() == 0
    assert page.locator("#main script").count() == 0
    assert dialogs == []
    assert errors == []

    status, body = d.get("/api/status")
    doc = json.loads(body)
    assert status == 200
    assert doc["schemaVersion"] == 1
    assert doc["attempted"]["revision"] == broken
    assert doc["applied"]["revision"] == second
    assert any(
        HOSTILE in m.encode().decode("unicode_escape") for m in [doc["message"], *doc["hosts"][0]["errors"]]
    )
    # text that reaches the page unescaped is escaped there, as wording.escape.printable does
    assert page.evaluate("show('a\\x1b[31m\\u202eb\\u0000 c')") == "a\\x1b[31m\\u202eb\\x00 c"

    d.stop()  # the daemon goes away: the page says so and keeps polling
    page.wait_for_function(
        "() => document.getElementById('live').className === 'down'", timeout=HANG_GUARD_S * 1000
    )
    again = start(*args)
    again.wait_attempted(broken)
    page.wait_for_function(
        "() => document.getElementById('live').className === 'ok'", timeout=HANG_GUARD_S * 1000
    )
    wait_text(page, "BuildFailed")
    wait_text(page, second[:12])  # the applied revision and the history, from the state file
    page.close()
