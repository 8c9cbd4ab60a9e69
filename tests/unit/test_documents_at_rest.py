"""Document trees at rest (``model.trees``): the daemon's overlay cache keeps every record's
tree packed between builds and unpacks only what a build reads.

Covers: a tree comes back equal, of the same types (the reader's ``ScalarText`` with its
typed value, a transformer's ``SharedText`` with its links inside the tree), one object
for the rest of the build and a new one after it; records sharing a tree share its bytes;
builds from a resting cache give kustomize's bytes for every build of the krusty corpus,
the first build and the warm one alike, and a changed kustomization rebuilt from resting
records gives what a cold build gives; the daemon's reconcile after a one-VM commit
unpacks only that VM's document and what its expansion reads (in-process,
``test:///default``), the first resync (pins captured) no VM's, the daemon's first build rests its documents
before its plan, and the CLI's builds keep their trees.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler import manifests, overlays
from reconciler.config.daemon import Overrides
from reconciler.config.daemon_file import load_config
from reconciler.context import SystemClock
from reconciler.daemon.service import Daemon
from reconciler.errors import ReconcilerError
from reconciler.manifests import ScalarText, parse_objects
from reconciler.model import Manifest, trees
from reconciler.overlays.cache import OverlayCache
from reconciler.overlays.linked import SharedText, shared
from reconciler.overlays.resource import Entries, Res
from tests.helpers.files import MemView
from tests.helpers.git import run_git as git
from tests.helpers.krusty import case_files

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "overlays" / "krusty" / "cases"  # as test_krusty_corpus lays it out
LEFT_OUT = set(re.findall(r"^\| `(Test\w+)` \|", (ROOT / "docs" / "kustomize-krusty.md").read_text(), re.M))


def kinds(node: Any) -> Any:
    """The tree with every node's type (and a text's typed value) beside it."""
    if isinstance(node, dict):
        return {k: kinds(v) for k, v in node.items()}
    if isinstance(node, list):
        return [kinds(v) for v in node]
    return (type(node), node, getattr(node, "typed", None))


def test_a_tree_comes_back_the_same() -> None:
    doc = parse_objects(
        b"kind: A\nmetadata:\n  name: a\n  annotations:\n    ratio: 1.50\n    n: ~\n", "a.yaml"
    )[0]
    cell = object()
    tree = {
        **doc.obj,
        "spec": {"a": shared("x", cell), "b": [shared("x", cell), 1, 2.5, None, True], "c": "plain"},
    }
    m = Manifest(tree, "a.yaml", 1)
    shelf = trees.Shelf()
    shelf.rest([m])
    assert shelf.packed == 1
    got = m.obj
    assert got is not tree
    assert got == tree
    assert kinds(got) == kinds(tree)
    assert isinstance(got["metadata"]["annotations"]["ratio"], ScalarText)
    assert isinstance(got["spec"]["a"], SharedText)
    assert got["spec"]["a"].cell is got["spec"]["b"][0].cell  # linked as they were
    assert m.obj is got  # one object for the rest of the build
    shelf.settle()
    again = m.obj
    assert again is not got
    assert again == tree
    assert (shelf.unpacked, shelf.packed) == (2, 1)  # packed once: the bytes stay


def test_records_of_one_tree_share_its_bytes() -> None:
    r = Res({"kind": "A", "metadata": {"name": "a"}}, "a.yaml", 1)
    m = Manifest(r.obj, "a.yaml", 1, ident=r.cur)
    shelf = trees.Shelf()
    shelf.rest([r, m, Manifest(["not", "a", "mapping"], "b.yaml")])  # type: ignore[arg-type]
    assert shelf.packed == 1
    assert (m.kind, m.name, m.namespace) == ("A", "a", "")
    assert shelf.unpacked == 0  # indexed without unpacking
    assert r.obj == m.obj
    assert r.obj is not m.obj


def built_text(case: Path, cache: OverlayCache) -> str:
    files, entry = case_files(case)
    return manifests.dump_documents(m.obj for m in overlays.build(MemView(files), entry, cache=cache))


SAME = sorted(
    c
    for c in CORPUS.iterdir()
    if (c / "ENTRY").exists() and c.name not in LEFT_OUT and not (c / "expected-error").exists()
)


@pytest.mark.parametrize("case", SAME, ids=lambda p: p.name)
def test_builds_from_a_resting_cache_are_kustomizes(case: Path) -> None:
    cache = OverlayCache()
    shelf = cache.rest_trees()
    expected = (case / "expected.yaml").read_text()
    assert built_text(case, cache) == expected  # built, rested, unpacked to print
    shelf.settle()
    assert built_text(case, cache) == expected  # warm: the records found resting


FLEET = {
    "base/kustomization.yaml": "resources: [a.yaml, b.yaml, types.yaml]\ncommonLabels: {tier: base}\n",
    "base/types.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {k: v}\n",
    "base/a.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  annotations: {n: 1.50}\n"
    "spec: {selector: {app: a}}\n",
    "base/b.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\nspec:\n  selector:\n"
    "    matchLabels: {app: b}\n  template:\n    metadata: {labels: {app: b}}\n"
    "    spec:\n      containers: [{name: c, image: x, envFrom: [{configMapRef: {name: cfg}}]}]\n",
    "top/kustomization.yaml": "resources: [../base]\nlabels: [{pairs: {env: prod}, includeSelectors: true}]\n",
}


def test_a_changed_overlay_rebuilds_from_resting_records() -> None:
    cache = OverlayCache()
    shelf = cache.rest_trees()
    overlays.build(MemView(FLEET), "top", cache)
    changed = {
        **FLEET,
        "top/kustomization.yaml": FLEET["top/kustomization.yaml"]
        + "namePrefix: p-\ncommonAnnotations: {owner: me}\npatches:\n"
        "- patch: '[{op: replace, path: /metadata/labels/tier, value: top}]'\n  target: {kind: Service}\n",
    }
    before = shelf.unpacked
    warm = overlays.build(MemView(changed), "top", cache)
    assert shelf.unpacked > before  # the base's records, resting, were the new steps' input
    cold = overlays.build(MemView(changed), "top", OverlayCache())
    assert manifests.dump_documents(m.obj for m in warm) == manifests.dump_documents(m.obj for m in cold)
    assert [m.set_by for m in warm] == [m.set_by for m in cold]


def test_the_clis_builds_keep_their_trees() -> None:
    cache = OverlayCache()
    built = overlays.build(MemView(FLEET), "top", cache)
    assert cache.shelf is None
    kept = [m.obj for m in built]
    again = overlays.build(MemView(FLEET), "top", cache)
    assert [m.obj for m in again] == kept
    assert all(m.obj is tree for m, tree in zip(again, kept, strict=True))  # the very trees, kept


def woken(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The records whose trees the builds from now on unpack (noted at each ``settle``)."""
    woke: list[Any] = []
    settle = trees.Shelf.settle

    def noted(shelf: trees.Shelf) -> None:
        woke.extend(shelf.awake)
        settle(shelf)

    monkeypatch.setattr(trees.Shelf, "settle", noted)
    return woke


def _fleet_daemon(tmp_path: Path, vms: int) -> tuple[Path, Daemon]:
    """A bench/make-fleet repository of ``vms`` VMs and a daemon on it (test:///default)."""
    repo = tmp_path / "fleet"
    subprocess.run([sys.executable, str(ROOT / "bench" / "make-fleet"), str(repo), "--vms", str(vms), "--git"],
                   check=True, capture_output=True)  # fmt: skip
    (tmp_path / "state").mkdir()
    overrides = Overrides(
        repo=str(repo), path="overlays/prod", connect="test:///default", state_dir=str(tmp_path / "state")
    )
    return repo, Daemon(load_config(None, overrides), clock=SystemClock())


@pytest.fixture
def no_fleet() -> Any:
    """``test:///default`` is one driver per process: a fleet an earlier test defined there
    (another repository, so another owner) is removed before and after each daemon test."""
    import libvirt

    def remove() -> None:
        conn = libvirt.open("test:///default")
        try:
            for dom in conn.listAllDomains():
                if re.fullmatch(r"vm-\d{5}", dom.name()):
                    if dom.isActive():
                        dom.destroy()
                    dom.undefine()
        finally:
            conn.close()

    remove()
    yield
    remove()


@pytest.mark.usefixtures("no_fleet")
def test_a_one_vm_commit_unpacks_that_vm_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, d = _fleet_daemon(tmp_path, 12)
    for _ in range(2):
        d.cycle(fetch=False, force=True)
    woke = woken(monkeypatch)
    vm = repo / "base" / "vms" / "vm-00003.yaml"
    vm.write_text(vm.read_text().replace("shard:", 'note: "x"\n    shard:', 1))
    git(repo, "commit", "-qam", "one VM")
    d.cycle(fetch=False, force=False)
    assert d.reason == "Succeeded", d.message
    read = {r.path for r in woke}
    assert "base/vms/vm-00003.yaml" in read
    # its document, and the instancetype and preference its expansion reads: no other VM's
    assert read <= {"base/vms/vm-00003.yaml", "base/instancetypes.yaml", "base/preferences.yaml"}, read
    for h in d.hosts:
        h.close()


@pytest.mark.usefixtures("no_fleet")
def test_the_first_resync_unpacks_no_vm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first resync is the first build with pins captured from the live domains: what
    the pins read of each VM was derived when the first build read its git pins."""
    _, d = _fleet_daemon(tmp_path, 12)
    d.cycle(fetch=False, force=True)
    woke = woken(monkeypatch)
    d.cycle(fetch=False, force=True)
    assert d.reason == "Succeeded", d.message
    hv = d.hosts[0].hv
    assert hv is not None
    assert hv.list_domains()  # pinned: its VMs are defined
    assert not {r.path for r in woke if r.path.startswith("base/vms/")}
    for h in d.hosts:
        h.close()


@pytest.mark.usefixtures("no_fleet")
def test_the_daemons_first_build_rests_before_its_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first reconcile's documents are packed when its overlay build ends (before the
    VMs are expanded, rendered and planned), not when its plan starts."""
    from reconciler import reconcile

    _, d = _fleet_daemon(tmp_path, 3)
    packed: list[int] = []
    desired = reconcile._desired

    def noted(*args: Any, **kwargs: Any) -> Any:
        shelf = d.context.cache(OverlayCache).shelf
        packed.append(shelf.packed if shelf is not None else 0)
        return desired(*args, **kwargs)

    monkeypatch.setattr(reconcile, "_desired", noted)
    d.cycle(fetch=False, force=True)
    assert d.reason == "Succeeded", d.message
    assert packed[0] >= 3  # every VM's document at least, already at rest
    for h in d.hosts:
        h.close()


def test_an_unpicklable_tree_stays_as_it_is() -> None:
    tree = {"kind": "A", "f": lambda: None}
    m = Manifest(tree, "a.yaml")
    trees.Shelf().rest([m])
    assert m.obj is tree


def test_a_build_error_leaves_the_cache_resting() -> None:
    cache = OverlayCache()
    shelf = cache.rest_trees()
    overlays.build(MemView(FLEET), "top", cache)
    broken = {**FLEET, "top/kustomization.yaml": FLEET["top/kustomization.yaml"] + "namespace: [x]\n"}
    with pytest.raises(ReconcilerError):
        overlays.build(MemView(broken), "top", cache)
    assert not shelf.awake


def test_a_rebuild_hands_out_the_same_documents_with_vars_and_origins() -> None:
    files = {
        "kustomization.yaml": "resources: [a.yaml, b.yaml]\nbuildMetadata: [originAnnotations]\n"
        "vars:\n- name: SVC\n  objref: {apiVersion: v1, kind: Service, name: a}\n",
        "a.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n",
        "b.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\nspec:\n  template:\n"
        "    spec:\n      containers: [{name: c, image: x, args: [--to=$(SVC)]}]\n",
    }
    cache = OverlayCache()
    shelf = cache.rest_trees()
    first = overlays.build(MemView(files), "", cache)
    text = manifests.dump_documents(m.obj for m in first)
    assert "--to=a" in text
    assert "config.kubernetes.io/origin" in text
    shelf.settle()
    unpacked = shelf.unpacked
    again = overlays.build(MemView(files), "", cache)
    assert all(a is b for a, b in zip(first, again, strict=True))  # the same records: nothing redone
    assert shelf.unpacked - unpacked == 1  # the var's source, its value read again


SCHEMA = (
    '{"definitions": {"VM": {"x-kubernetes-group-version-kind": [{"group": "g", "version": "v", "kind": "VM"}],'
    ' "properties": {"spec": {"$ref": "#/definitions/Spec"}}}, "Spec": {"properties": {"disks": {"type": "array",'
    ' "items": {"type": "object"}, "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}}}}}'
)
LEVELS = {
    "top/kustomization.yaml": "resources: [../a, ../b]\n",
    "a/kustomization.yaml": "resources: [vm.yaml]\npatches: [{path: p.yaml}]\n",
    "a/vm.yaml": "apiVersion: g/v\nkind: VM\nmetadata: {name: x}\nspec:\n  disks: [{name: root}, {name: cache}]\n",
    "a/p.yaml": "apiVersion: g/v\nkind: VM\nmetadata: {name: x}\nspec:\n  disks: [{name: data}, {name: cache, bus: s}]\n",
    "b/kustomization.yaml": "openapi: {path: schema.json}\nresources: [cm.yaml]\n",
    "b/schema.json": SCHEMA,
    "b/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
}


def test_a_steps_record_rests_derived_and_is_made_again_when_read() -> None:
    """A step's new record rests without bytes of its own: a later build whose next step
    misses on it makes its tree again with that build's step (the same key)."""
    cache = OverlayCache()
    shelf = cache.rest_trees()
    overlays.build(MemView(FLEET), "top", cache)
    packed = shelf.packed
    changed = {**FLEET, "top/kustomization.yaml": FLEET["top/kustomization.yaml"] + "namePrefix: p-\n"}
    warm = overlays.build(MemView(changed), "top", cache)
    assert shelf.derived > 0  # the base's labelled records, made again for the top's new steps
    cold = overlays.build(MemView(changed), "top", OverlayCache())
    assert manifests.dump_documents(m.obj for m in warm) == manifests.dump_documents(m.obj for m in cold)
    assert shelf.packed - packed == len(warm)  # the new manifests: no step's record is packed
    records = [
        r
        for r in cache._memo.values()
        if isinstance(r, Res) and isinstance(getattr(r, "_shelf", None), trees._Step)
    ]
    assert records
    with pytest.raises(RuntimeError):
        records[0].obj  # noqa: B018 - outside a build that ran its step


def test_a_schema_set_mid_build_leaves_earlier_records_as_they_were_made() -> None:
    """A sibling's openapi schema, read after a base's patch ran without it: the patch's
    record, resting derived, is made again as it was made (its list replaced, not merged)."""
    cache = OverlayCache()
    cache.rest_trees()
    overlays.build(MemView(LEVELS), "top", cache)
    changed = {
        **LEVELS,
        "top/kustomization.yaml": LEVELS["top/kustomization.yaml"] + "commonLabels: {t: x}\n",
    }
    warm = overlays.build(MemView(changed), "top", cache)
    cold = overlays.build(MemView(changed), "top", OverlayCache())
    assert manifests.dump_documents(m.obj for m in warm) == manifests.dump_documents(m.obj for m in cold)
    assert "root" not in manifests.dump_documents(m.obj for m in cold)  # replaced: no schema yet


def test_a_kustomizations_entries_are_kept_compact_and_given_back_the_same() -> None:
    entries = [
        ("resources", 0, "vms/a.yaml", "base/vms/a.yaml"),
        ("resources", 1, "./b.yaml", "base/b.yaml"),
        ("resources", 2, "../other", "other"),
        ("bases", 0, "c.yaml", "base/c.yaml"),
    ]
    kept = Entries.of("base/kustomization.yaml", entries)
    assert isinstance(kept, Entries)
    assert list(kept) == entries
    plain = [("resources", 0, "a.yaml", "a.yaml"), ("resources", 1, "b.yaml", "b.yaml")]
    top = Entries.of("kustomization.yaml", plain)
    assert isinstance(top, Entries)
    assert list(top) == plain
    odd = [("resources", 1, "a.yaml", "a.yaml")]  # not indexed from 0: kept as given
    assert Entries.of("kustomization.yaml", odd) is odd
    cache = OverlayCache()
    cache.docs_put("base/kustomization.yaml", "entries:1", entries)
    assert list(cache.docs_get("base/kustomization.yaml", "entries:1")) == entries
