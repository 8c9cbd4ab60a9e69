"""Issue item 3: a corrupt blob in the remote's mirror is repaired by cloning again.

GitPython reports an unreadable object as ``ValueError``; it is a source error, so the
documented re-clone happens (with a log line) and the next commit applies, instead of
every reconcile failing as ApplyFailed.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.helpers.faults import config, memory_kib, name, vm

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.daemon import Daemon
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def corrupt_blob(mirror: Path, rev_path: str) -> str:
    """Unpack the mirror's packs into loose objects and overwrite the blob of ``rev_path``."""
    packs = sorted((mirror / "objects" / "pack").glob("*.pack"))
    moved = mirror.parent / "packs-aside"
    moved.mkdir()
    for pack in packs:
        for f in pack.parent.glob(pack.stem + ".*"):
            f.rename(moved / f.name)
    for pack in sorted(moved.glob("*.pack")):
        with pack.open("rb") as fh:
            subprocess.run(["git", "--git-dir", str(mirror), "unpack-objects", "-q"], stdin=fh, check=True)
    blob = git("--git-dir", str(mirror), "rev-parse", rev_path, cwd=mirror)
    loose = mirror / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"not a zlib stream")
    return blob


def test_corrupt_blob_in_the_mirror_triggers_a_clone(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom, other = name("corrupt-a"), name("corrupt-b")
    own_domains += [dom, other]
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    git_repo.git("remote", "add", "origin", str(remote))
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted"))
    first = git_repo.commit("a")
    git_repo.git("push", "-q", "origin", "main")
    cfg = config(tmp_path, f"file://{remote}", extra="intervals: {fetch: 1s, resync: 1h}\n")
    d = start("--config", str(cfg))
    d.wait_applied(first)
    assert d.stop() == 0
    (mirror,) = (d.state_dir / "source").glob("*.git")
    corrupt_blob(mirror, f"{first}:vms/a.yaml")

    # A new commit that keeps vms/a.yaml (its blob now unreadable in the mirror).
    git_repo.write("vms/b.yaml", vm(other, strategy="Halted", memory="96Mi"))
    second = git_repo.commit("b")
    git_repo.git("push", "-q", "origin", "main")
    d = start("--config", str(cfg))
    state = d.wait_applied(second)
    recloned = d.events("mirror is corrupt: cloning again")
    assert recloned
    assert "corrupt" in recloned[0].get("error", "")
    assert not d.events("internal error in the build")
    assert not d.events("internal error in the apply")
    assert state["reason"] == "Succeeded"
    assert memory_kib(other) == 96 * 1024
    assert d.stop() == 0
