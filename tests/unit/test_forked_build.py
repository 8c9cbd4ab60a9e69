"""diff, validate and plan with the forked mapper give exactly the serial answers,
errors with their file:line included; the overlay build parses resource files through
the mapper, and only those its kustomizations read."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import overlays, ownership, render, source
from reconciler.cli import forked
from reconciler.cli.forked import ForkedMapper
from reconciler.compare.cache import CompareCache, compare, compare_all
from reconciler.context import SERIAL, Context
from reconciler.desired import desired_state
from reconciler.model import LiveDomain, PowerState, RunStrategy
from reconciler.overlays.cache import OverlayCache
from reconciler.plan.revision import plan_host
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.problems import words
from tests.helpers.git import run_git as git

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from reconciler.model import RenderedDomain

ROOT = Path(__file__).resolve().parents[2]
VMS = 2 * forked.MIN_SHARE + 50


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
    for mapper in (SERIAL, ForkedMapper(3)):
        context = Context(mapper)
        d = desired_state(snap, "overlays/prod", HostConfig(), render.HostCaps.default(), context=context)
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
    for mapper in (SERIAL, ForkedMapper(2)):
        context = Context(mapper)
        d = desired_state(snap, "overlays/prod", HostConfig(), render.HostCaps.default(), context=context)
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


def test_the_build_parses_what_its_kustomizations_read_through_the_mapper(fleet: Path) -> None:
    snap = source.read_snapshot(fleet, "HEAD~1")
    files = snap.files
    mapped: list[str] = []

    class Recording:
        """The forked mapper, noting the files handed to it (items: path, blob, bytes)."""

        def map(
            self, fn: Callable[[tuple[str, str, bytes]], object], items: Sequence[tuple[str, str, bytes]]
        ) -> list[object]:
            mapped.extend(item[0] for item in items)
            return ForkedMapper(2).map(fn, items)

    cache = OverlayCache()
    built = overlays.build(files, "overlays/prod", cache, Recording())  # type: ignore[arg-type]
    vm_files = [p for p in mapped if p.startswith("base/vms/")]
    assert len(vm_files) == VMS
    assert not any(p.startswith("unused/") for p in mapped)  # YAML no kustomization lists
    assert all(cache.docs_get(p, files.blob_id(p)) for p in vm_files)  # kept for the next build
    assert [m.obj for m in built] == [m.obj for m in overlays.build(files, "overlays/prod")]
    mapped.clear()
    again = overlays.build(files, "overlays/prod", cache, Recording())  # type: ignore[arg-type]
    assert mapped == []  # a warm build parses nothing
    assert all(a is b for a, b in zip(again, built, strict=True))


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
    for mapper in (SERIAL, ForkedMapper(2)):
        cache = CompareCache()
        plans.append(plan_host(desired, live, PlanPolicy(), now=10.0, cache=cache, mapper=mapper))
        assert cache.misses == len(live)  # every comparison made once, here or in a child
    one, two = plans
    assert two == one
    changed = {c.name: c for c in one.changes if not c.is_noop}
    assert set(changed) == {live[-5].name, desired.rendered[-9].name}
    assert changed[live[-5].name].fields  # the drifted memory, found in the child's share too

    broken = replace(live[-3], persistent_xml="<domain", live_xml="<domain")  # not XML
    by_name = {lv.name: lv for lv in (*live, broken)}
    cache = CompareCache()
    pairs = [(d, by_name[d.name]) for d in desired.rendered if d.name in by_name]
    compare_all(cache, pairs, ForkedMapper(2))
    assert broken.name not in cache.names()  # a comparison that fails is left to the plan
    assert len(cache.names()) == len(live) - 1
    d = next(d for d in desired.rendered if d.name == live[-5].name)
    made = compare(d, live[-5], cache)  # found: the child's
    assert cache.hits == 1
    assert made == compare(d, live[-5], CompareCache())  # as made here
    assert made[0]


def test_plan_prints_the_same_with_jobs(fleet: Path) -> None:
    cli = [sys.executable, "-m", "reconciler.cli", "plan", "--repo", str(fleet), "--ref", "HEAD~1"]
    cli += ["--path", "overlays/prod", "--connect", "test:///default", "-o", "json"]
    outs = [subprocess.run([*cli, "-j", j], capture_output=True, text=True) for j in ("1", "2")]
    assert outs[0].returncode == outs[1].returncode == 2  # every VM to create
    assert (
        f'"name": "{sorted(p.stem for p in (fleet / "base" / "vms").glob("*.yaml"))[-1]}"' in outs[0].stdout
    )
    assert outs[1].stdout == outs[0].stdout
