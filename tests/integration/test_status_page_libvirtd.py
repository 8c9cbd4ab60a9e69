"""The status page while libvirtd restarts (reconciler/daemon/page.py, publish.py): a
`reconciler run` subprocess on test+unix:///default, the page in Debian's chromium.

Covers: libvirtd goes away: the page keeps answering and shows the host unreachable with
the reason; libvirtd comes back: the page shows the host reachable and its VM synced
again, by itself. Restarts the machine's libvirtd: run it under /tmp/rtest.lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.host.hypervisor import Hypervisor
from tests.helpers.browser import browser, free_port, wait_text
from tests.helpers.faults import kill_libvirtd, libvirtd_up
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Callable

    from playwright.sync_api import Browser

    from tests.helpers.daemon import Daemon
    from tests.helpers.git import GitRepo

__all__ = ["browser"]  # the fixture
URI = "test+unix:///default"


def test_the_page_keeps_working_while_libvirtd_restarts(
    git_repo: GitRepo, start: Callable[..., Daemon], browser: Browser
) -> None:
    libvirtd_up()
    name = "rtest-page-restart"
    git_repo.write("vms/a.yaml", vm_yaml(name))
    sha = git_repo.commit()
    port = free_port()
    d = start("--repo", str(git_repo.path), "--connect", URI, "--listen", f"127.0.0.1:{port}")
    try:
        d.wait_applied(sha)
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/")
        wait_text(page, "Synced")
        assert "unreachable" not in page.locator("#main").inner_text()
        kill_libvirtd()
        down = wait_text(page, "unreachable")
        libvirtd_up()
        back = wait_text(page, "unreachable", present=False)
        wait_text(page, "Synced")
        print(
            f"\nlibvirtd killed -> page shows unreachable: {down:.2f} s; up again -> reachable: {back:.2f} s"
        )
        assert page.locator("#live").inner_text() == "live"  # the page itself never lost the daemon
        page.close()
    finally:
        libvirtd_up()
        d.stop()
        with Hypervisor(URI) as hv:
            for dom in hv.list_domains():
                if dom.name == name:
                    if dom.active:
                        hv.destroy(name)
                    hv.undefine(name)
