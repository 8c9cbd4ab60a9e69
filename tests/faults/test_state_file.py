"""Issue item 1: a wrong-shaped or truncated ``state.json`` never stops the daemon.

The file is a cache: it is set aside with a warning (nothing silently dropped: the
bad bytes stay readable in ``state.json.bad-*``), the last applied commit is rebuilt
from the domains' ownership marks, and the daemon converges as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.model import PowerState
from tests.helpers.faults import config, name, state_of, vm

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.daemon import Daemon
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)

BAD = {
    "last-not-object": '{"last": "x"}',
    "hosts-not-object": '{"hosts": "x"}',
    "history-not-list": '{"history": 5}',
    "truncated": '{"attempted_revision": "0123456789abcdef", "history": [{"revision": "01',
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_state_file_is_set_aside_and_rebuilt_from_the_marks(
    kind: str, tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name(f"state-{kind}")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted"))
    sha = git_repo.commit()
    cfg = config(tmp_path, str(git_repo.path))
    first = start("--config", str(cfg))
    first.wait_applied(sha)
    assert first.stop() == 0
    state_dir = first.state_dir
    (state_dir / "state.json").write_text(BAD[kind])

    d = start("--config", str(cfg))
    state = d.wait_applied(sha)
    assert d.proc.poll() is None  # still running: no traceback, no exit
    warned = d.events("state file unusable: set aside, rebuilding from the hosts")
    assert warned, "no warning for the bad state file"
    aside = sorted(state_dir.glob("state.json.bad-*"))
    assert len(aside) == 1
    assert aside[0].read_text() == BAD[kind]
    rebuilt = d.events("state rebuilt from the domains' marks")
    assert rebuilt
    assert rebuilt[0]["applied"] == sha[:12]
    assert state["reason"] == "Succeeded"
    assert {v["name"]: v["sync"] for v in state["vms"]}[dom] == "Synced"
    assert state_of(dom) == PowerState.SHUTOFF
    assert not d.events("internal error in the build")
    assert not d.events("internal error in the apply")
    assert d.stop() == 0
