"""diff, validate and plan over several processes give exactly the single process's
answers, errors with their file:line included."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import forked, overlays, ownership, render, source
from reconciler.compare.cache import CompareCache, compare, prime
from reconciler.config.host import HostConfig
from reconciler.desired import desired_state
from reconciler.model import LiveDomain, PowerState, RunStrategy
from reconciler.overlays.cache import OverlayCache
from reconciler.overlays.engine import Builder
from reconciler.plan.build import PlanPolicy
from reconciler.plan.revision import plan_host
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model import RenderedDomain

ROOT = Path(__file__).resolve().parents[2]
VMS = 2 * forked.MIN_SHARE + 50


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fleet whose head breaks one VM late in the list three ways (YAML, expansion,
    render), so the forked processes meet errors that need the parent's reader."""
    repo = tmp_path_factory.mktemp("fleet") / "repo"
    subprocess.run([sys.executable, str(ROOT / "bench" / "make-fleet"), str(repo), "--vms", str(VMS), "--git"],
                   check=True, capture_output=True)  # fmt: skip
    unused = repo / "unused"
    unused.mkdir()
    for name in ("a", "b"):  # YAML in the tree that no kustomization reads
        (unused / f"{name}.yaml").write_text("kind: ConfigMap\nmetadata: {name: x}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "unused files")
    vms = repo / "base" / "vms"
    late = sorted(vms.glob("*.yaml"))[-30:]
    late[0].write_text(late[0].read_text().replace("u1.small", "u1.medium").replace("u1.large", "u1.xlarge"))
    late[1].write_text(late[1].read_text() + "  bad: [unclosed\n")
    late[2].write_text(late[2].read_text().replace("instancetype:", "instancetype:\n    kind: NoSuchKind"))
    late[3].write_text(
        late[3].read_text().replace("runStrategy: Always", "runStrategy: Always\n  template: 7", 1)
    )
    git(repo, "commit", "-qam", "head")
    return repo


def test_validate_gives_the_same_result_in_one_or_several_processes(fleet: Path) -> None:
    snap = source.read_snapshot(fleet, "HEAD")
    results = []
    for processes in (1, 3):
        overlays.DEFAULT_CACHE.clear()
        d = desired_state(snap, "overlays/prod", HostConfig(), render.HostCaps.default(), processes=processes)
        results.append(d)
    one, many = results
    assert one.errors  # the broken file stops the build: the error is the same
    assert many.errors == one.errors
    assert [(r.name, r.xml) for r in many.rendered] == [(r.name, r.xml) for r in one.rendered]
    assert many.warnings == one.warnings


def test_a_broken_vm_in_a_forked_share_is_reported_at_its_line(fleet: Path) -> None:
    git(fleet, "checkout", "-q", "HEAD~1", "--", "base/vms")
    vms = sorted((fleet / "base" / "vms").glob("*.yaml"))
    vms[-3].write_text(vms[-3].read_text().replace("instancetype:", "instancetype:\n    kind: NoSuchKind"))
    vms[-2].write_text(vms[-2].read_text().replace("          - name: data", "          - name: nosuch", 1))
    git(fleet, "commit", "-qam", "errors in expansion and rendering")
    snap = source.read_snapshot(fleet, "HEAD")
    out = []
    for processes in (1, 2):
        d = desired_state(snap, "overlays/prod", HostConfig(), render.HostCaps.default(), processes=processes)
        out.append(d)
    one, two = out
    assert len(one.errors) == 2
    assert two.errors == one.errors
    assert any(
        "'nosuch' not found" in e for e in map(words, two.errors)
    )  # a render error, its line read here
    assert all(".yaml:" in e for e in map(words, two.errors))
    assert [(r.name, r.xml) for r in two.rendered] == [(r.name, r.xml) for r in one.rendered]
    git(fleet, "reset", "-q", "--hard", "HEAD~1")


def test_prefetch_parses_what_the_build_reads_and_nothing_else(fleet: Path) -> None:
    snap = source.read_snapshot(fleet, "HEAD~1")
    files = snap.files
    assert isinstance(files, source.GitTreeView)
    cache = OverlayCache()
    builder = Builder(files, cache)
    wanted = builder.resource_files("overlays/prod")
    vm_files = [p for p in wanted if p.startswith("base/vms/")]
    assert len(vm_files) == VMS
    assert "base/instancetypes.yaml" in wanted
    assert not any(p.startswith("unused/") for p in wanted)  # YAML no kustomization lists
    with files.blob_reader() as read:  # its own git process, as a forked child uses it
        assert all(read(files.blob_id(p) or "", p) == files.read(p) for p in wanted)
    builder.prefetch(2, "overlays/prod")
    parsed = {p: cache.docs_get(p, files.blob_id(p)) for p in vm_files}
    assert all(parsed.values())  # every VM file parsed before the build asked for it
    assert all(cache.docs_get(p, files.blob_id(p)) is None for p in ("unused/a.yaml", "unused/b.yaml"))
    serial = Builder(files, OverlayCache())
    assert all(
        [r.obj for r in parsed[p] or ()] == [r.obj for r in serial.parse_file(p, files.blob_id(p))]
        for p in vm_files
    )


def test_diff_prints_the_same_with_jobs(fleet: Path) -> None:
    cli = [sys.executable, "-m", "reconciler.cli", "diff", "--repo", str(fleet), "--base", "HEAD~1"]
    outs = [
        subprocess.run(
            [*cli, "--path", "overlays/prod", "-j", j, "-o", "json"], capture_output=True, text=True
        )
        for j in ("1", "2")
    ]
    assert outs[0].returncode == outs[1].returncode == 1  # head does not build
    assert outs[1].stdout == outs[0].stdout
    assert outs[1].stderr == outs[0].stderr


def _held(desired: Sequence[RenderedDomain], revision: str) -> list[LiveDomain]:
    """What a host that applied ``desired`` holds: each domain defined as rendered, and
    running unless its run strategy is Halted."""
    out = []
    for d in desired:
        mark = ownership.with_start(ownership.mark_for(d, revision), 1.0, 0)
        xml = ownership.with_mark(d.xml, mark)
        if d.run_strategy == RunStrategy.HALTED:
            out.append(LiveDomain(d.name, d.uuid, PowerState.SHUTOFF, xml, "", mark, state_reason="shutdown"))
        else:
            out.append(LiveDomain(d.name, d.uuid, PowerState.RUNNING, xml, xml, mark, state_reason="booted"))
    return out


def test_plan_compares_the_same_in_one_or_several_processes(fleet: Path) -> None:
    snap = source.read_snapshot(fleet, "HEAD~1")
    desired = desired_state(snap, "overlays/prod", HostConfig(), render.HostCaps.default())
    assert not desired.errors
    live = _held(desired.rendered, snap.commit)
    # Drift late in the list (in a forked share): memory changed on the host, one
    # definition libvirt could not have produced (unparsable), one domain gone.
    drifted = live[-5]
    more = re.sub(r'(<memory unit="b">)(\d+)', lambda m: f"{m[1]}{int(m[2]) * 2}", drifted.persistent_xml)
    assert more != drifted.persistent_xml
    live[-5] = replace(drifted, persistent_xml=more, live_xml=more)
    del live[-9]
    plans = []
    for processes in (1, 2):
        cache = CompareCache()
        plans.append(plan_host(desired, live, PlanPolicy(), now=10.0, cache=cache, processes=processes))
        assert cache.misses == len(live)  # every comparison made once, here or in a child
    one, two = plans
    assert two == one
    changed = {c.name: c for c in one.changes if not c.is_noop}
    assert set(changed) == {live[-5].name, desired.rendered[-9].name}
    assert changed[live[-5].name].fields  # the drifted memory, found in the child's share too

    broken = replace(live[-3], persistent_xml="<domain", live_xml="<domain")  # not XML
    by_name = {lv.name: lv for lv in (*live, broken)}
    cache = CompareCache()
    prime(cache, [(d, by_name[d.name]) for d in desired.rendered if d.name in by_name], 2)
    assert broken.name not in cache.diffs  # a comparison that fails is left to the plan
    assert len(cache.diffs) == len(live) - 1
    d = next(d for d in desired.rendered if d.name == live[-5].name)
    assert cache.diffs[d.name][2] == compare(d, live[-5], CompareCache())  # the child's, as made here
    assert cache.diffs[d.name][2][0]


def test_plan_prints_the_same_with_jobs(fleet: Path) -> None:
    cli = [sys.executable, "-m", "reconciler.cli", "plan", "--repo", str(fleet), "--ref", "HEAD~1"]
    cli += ["--path", "overlays/prod", "--connect", "test:///default", "-o", "json"]
    outs = [subprocess.run([*cli, "-j", j], capture_output=True, text=True) for j in ("1", "2")]
    assert outs[0].returncode == outs[1].returncode == 2  # every VM to create
    assert (
        f'"name": "{sorted(p.stem for p in (fleet / "base" / "vms").glob("*.yaml"))[-1]}"' in outs[0].stdout
    )
    assert outs[1].stdout == outs[0].stdout
