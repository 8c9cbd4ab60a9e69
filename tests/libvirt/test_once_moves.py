"""``run --once`` finishes a revision's work (reconciler/daemon/service.py).

Covers: a VM whose ``kubernetes.io/hostname`` moves it from one host to another is,
after one ``run --once``, stopped and undefined on the old host and running on the new
one (exit 0), not left half moved (the old copy stopped, the new one never started);
``applied`` is announced for both hosts when the move is done, not before; when the
old host cannot finish its half the run exits 1 naming the move that is left.
The second host is a private test driver (``test:///<file>``), the first the shared
``test:///default``; VM names are unique to this module.
"""

from __future__ import annotations

import dataclasses
import io
from typing import TYPE_CHECKING

import pytest
import structlog

from reconciler.config.daemon import HostEntry
from reconciler.settings.host import HostConfig
from tests.helpers.loop import Daemons

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

DAEMONS = Daemons("once-move-")
NAME = "once-move-web"


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    yield
    DAEMONS.close()


def vm(host: str) -> str:
    return f"""\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {NAME}
spec:
  runStrategy: Always
  template:
    spec:
      nodeSelector:
        kubernetes.io/hostname: {host}
      domain:
        devices: {{}}
        memory:
          guest: 64Mi
"""


def hosts(tmp_path: Path) -> tuple[HostEntry, HostEntry]:
    node = tmp_path / "node.xml"
    node.write_text("<node/>")
    return (
        HostEntry("test:///default", HostConfig(name="h1")),
        HostEntry(f"test://{node}", HostConfig(name="h2")),
    )


def test_run_once_finishes_a_host_move(tmp_path: Path, git_repo: GitRepo) -> None:
    """h1 is reconciled first: it holds the new copy while h2 still has the old one; the
    old copy goes, and the same run creates and starts the new one."""
    git_repo.write("vms/web.yaml", vm("h2"))
    git_repo.commit()
    d = DAEMONS.make(git_repo, tmp_path / "s", hosts=hosts(tmp_path))
    d.out = out = io.StringIO()
    d.cycle(fetch=False, force=True)  # on h2 (its private driver lives with this connection)
    h1, h2 = d.hosts
    assert [(r.name, r.state) for r in h2.rows] == [(NAME, "running")], out.getvalue()
    git_repo.write("vms/web.yaml", vm("h1"))
    moved = git_repo.commit()
    with structlog.testing.capture_logs() as logs:
        assert d.run(once=True) == 0, out.getvalue()
    assert d.applied == moved
    assert [(r.name, r.state) for r in h1.rows] == [(NAME, "running")], out.getvalue()
    assert not [r for r in h2.rows if r.name == NAME], out.getvalue()
    # ``applied`` is announced for each host when the move is done, not before
    said = [e.get("event") if e.get("event") != "event" else f"{e['kind']} {e['host']}" for e in logs]
    created = said.index("created")
    assert said.index("applied h1") > created, said
    assert said.index("applied h2") > created, said


def test_run_once_says_what_is_left_and_fails(tmp_path: Path, git_repo: GitRepo) -> None:
    """The old host cannot be reached: its copy may still run, the new one is not
    created, and ``--once`` exits 1 with a ``not finished`` line naming the move."""
    git_repo.write("vms/web.yaml", vm("h2"))
    git_repo.commit()
    d = DAEMONS.make(git_repo, tmp_path / "s", hosts=hosts(tmp_path))
    d.out = out = io.StringIO()
    d.cycle(fetch=False, force=True)
    h1, h2 = d.hosts
    h2.close()
    h2.entry = dataclasses.replace(h2.entry, uri=f"test://{tmp_path / 'gone.xml'}")  # unreachable now
    git_repo.write("vms/web.yaml", vm("h1"))
    git_repo.commit()
    assert d.run(once=True) == 1
    text = out.getvalue()
    assert f"not finished: vm/{NAME}: move h2 → h1: host h2 is unreachable" in text, text
    assert not [r for r in h1.rows if r.name == NAME and r.state == "running"]
