"""Plans in the user's words, and a diff that shares its work between base and head."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import prdiff, render, source
from reconciler.compare import provenance
from reconciler.context import Context
from reconciler.desired import PipelineCache, desired_state
from reconciler.desired.pins import pins_from_live
from reconciler.model.changes import ChangeClass, FieldChange
from reconciler.settings.host import HostConfig
from tests.helpers.git import GitRepo
from tests.helpers.manifests import CATALOG, VM_WITH_TYPE

if TYPE_CHECKING:
    from pathlib import Path


def _kustomization(vms: list[str]) -> str:
    return "resources:\n- catalog.yaml\n" + "".join(f"- vms/{v}.yaml\n" for v in vms)


def _repo(tmp_path: Path) -> tuple[GitRepo, dict[str, str]]:
    r = GitRepo(tmp_path / "repo")
    names = ["a", "b", "c"]
    r.write("catalog.yaml", CATALOG.format(small_memory="1Gi", topology="sockets"))
    for n in names:
        r.write(f"vms/{n}.yaml", VM_WITH_TYPE.format(name=n, strategy="Always", instancetype="u1.small"))
    r.write("kustomization.yaml", _kustomization(names))
    commits = {"start": r.commit("start")}
    r.write("vms/a.yaml", VM_WITH_TYPE.format(name="a", strategy="Always", instancetype="u1.medium"))
    commits["resized"] = r.commit("a: u1.medium")
    r.write("catalog.yaml", CATALOG.format(small_memory="3Gi", topology="sockets"))
    commits["edited"] = r.commit("u1.small: 3Gi")
    return r, commits


def _diff(r: GitRepo, base: str, head: str, host: HostConfig | None = None) -> prdiff.PRDiff:
    return prdiff.diff_snapshots(
        source.read_snapshot(r.path, base),
        source.read_snapshot(r.path, head),
        "",
        host or HostConfig(),
        render.HostCaps.default(),
    )


def test_a_new_instancetype_is_told_as_memory_and_cpu_with_their_origin(tmp_path: Path) -> None:
    r, c = _repo(tmp_path)
    d = _diff(r, c["start"], c["resized"])
    (entry,) = d.vms
    by_field = {u.field: u for u in entry.changes}
    mem = by_field["memory.guest"]
    assert (mem.old, mem.new, mem.change_class) == ("1Gi", "2Gi", ChangeClass.RESTART)
    assert set(mem.libvirt) == {"currentMemory", "memory"}  # one change, not two
    assert "the VM's instancetype u1.small → u1.medium (vms/a.yaml:8)" in mem.origin
    assert "instancetype u1.medium spec.memory.guest (catalog.yaml:" in mem.origin
    text = prdiff.format_text(d)
    assert "memory.guest: 1Gi → 2Gi" in text
    assert "currentMemory" not in text  # libvirt paths only under -v
    assert "(libvirt: currentMemory, memory)" in prdiff.format_text(d, verbose=True)
    vm_json = prdiff.to_json_obj(d)["vms"][0]
    assert prdiff.to_json_obj(d)["schemaVersion"] == 3
    (mem_json,) = [ch for ch in vm_json["changes"] if ch["field"] == "memory.guest"]
    assert (mem_json["before"], mem_json["after"], mem_json["class"]) == ("1Gi", "2Gi", "restart")
    assert mem_json["libvirtPaths"] == ["currentMemory", "memory"]
    assert "| `memory.guest` | `1Gi` | `2Gi` |" in prdiff.format_markdown(d)


def test_an_edited_instancetype_followed_names_the_edit(tmp_path: Path) -> None:
    r, c = _repo(tmp_path)
    d = _diff(r, c["resized"], c["edited"], HostConfig(instancetype_revisions="follow"))
    assert [e.name for e in d.vms] == ["b", "c"]
    mem = {u.field: u for u in d.vms[0].changes}["memory.guest"]
    assert (mem.old, mem.new) == ("1Gi", "3Gi")
    assert mem.origin.startswith("instancetype u1.small edited; instancetype u1.small spec.memory.guest")


def test_cpu_topology_and_machine_fields_map_to_kubevirt_paths() -> None:
    fields = (
        FieldChange("cpu/topology@sockets", "1", "2", ChangeClass.RESTART),
        FieldChange("os/type@machine", "q35", "pc-q35-8.2", ChangeClass.RESTART),
        FieldChange("currentMemory", "2097152", "1572864", ChangeClass.LIVE),
        FieldChange("memory", "4194304", "4194304", ChangeClass.LIVE),
    )
    got = [(u.field, u.old, u.new) for u in provenance.explain(fields)]
    assert got == [
        ("cpu.sockets", "1", "2"),
        ("machine.type", "q35", "pc-q35-8.2"),
        ("memory.guest", "2Gi", "1536Mi"),
        ("memory.maxGuest", "4Gi", "4Gi"),  # moved apart from the guest size: its own field
    ]


def test_head_shares_expansion_and_rendering_with_base(tmp_path: Path) -> None:
    """A VM whose inputs are the same at both refs is expanded and rendered once; pinned or not,
    the result is the one a separate build gives."""
    r, c = _repo(tmp_path)
    host, caps = HostConfig(), render.HostCaps.default()
    base_snap, head_snap = (
        source.read_snapshot(r.path, c["start"]),
        source.read_snapshot(r.path, c["resized"]),
    )
    cache, context = PipelineCache(), Context()
    base = desired_state(base_snap, "", host, caps, cache=cache, context=context)
    pins = pins_from_live(prdiff.simulated_live(base))
    assert {k.domain for k in pins} == {"a", "b", "c"}
    cache.hits = cache.misses = 0
    head = desired_state(head_snap, "", host, caps, pins, cache=cache, context=context)
    assert (cache.hits, cache.misses) == (2, 1)  # b and c shared; a changed
    base_by = {d.name: d for d in base.rendered}
    shared = {d.name for d in head.rendered if d is base_by[d.name]}
    assert shared == {"b", "c"}
    alone = desired_state(head_snap, "", host, caps, pins)
    assert [d.xml for d in alone.rendered] == [d.xml for d in head.rendered]
