"""Mediated devices (render.mdev, render.allocate) and their host configuration.

Covers: the host config's ``mdev: {type, uuids}`` pools and their errors at file:line
(no UUIDs, a bad UUID, one UUID in two pools, a bad type); handing out is deterministic
(VMs by name, pool order), one instance per VM, stable (a VM keeps what its live
domain holds even when a VM sorted before it arrives), never gives away what another
domain of the host holds, and skips instances the host lacks or of another type; an
exhausted pool is an error naming the VMs holding it; a VM selecting another host takes
nothing of this host's pool; what a domain holds reads back
from its XML; through a whole revision, the VM that does not fit is a host error at
its deviceName's file:line while the others proceed, and the next revision, read back
from the host, keeps every placement; a pull request adding a VM sorted first changes
no other VM's instance (PR diff); KubeVirt's vGPU display rules (the first vGPU by
default, ``enabled: false``, ``ramFB``, none without graphics, one framebuffer at most).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from reconciler import prdiff, render, source
from reconciler.config.host import load_host_config
from reconciler.desired import desired_state
from reconciler.errors import ConfigError, RenderError
from reconciler.hostfacts import HostFacts
from reconciler.model import ExpandedVM, LiveDomain, Manifest, PowerState, VMKey
from reconciler.render import HostCaps, mdev, render_domain
from reconciler.render.placement import Held, held_from_live
from reconciler.settings.host import HostConfig, HostDevice
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

U1, U2, U3 = (f"9a8c6a4e-2f57-4c3b-9d0c-5d1f3b8e1a0{i}" for i in (1, 2, 3))
GPU = "nvidia.com/GRID_T4-1Q"
POOLS = {GPU: HostDevice("mdev", "nvidia-222", (U1, U2, U3))}
FIELD = "spec.template.spec.domain.devices.gpus[0].deviceName"


def need(*devices: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        (d, f"spec.template.spec.domain.devices.gpus[{i}].deviceName") for i, d in enumerate(devices)
    )


def test_host_config_reads_a_pool() -> None:
    config = load_host_config(
        f"hostDevices:\n  {GPU}:\n    mdev:\n      type: nvidia-222\n      uuids: [{U2.upper()}, {U1}]\n".encode(),
        "host.yaml",
    )
    assert config.host_devices[GPU] == HostDevice("mdev", "nvidia-222", (U2, U1))  # lower case, in order


@pytest.mark.parametrize(
    ("entry", "where", "message"),
    [
        ("{mdev: {type: nvidia-222}}", "3:", "hostDevices['a'].mdev.uuids: a non-empty list"),
        ("{mdev: {uuids: [not-a-uuid]}}", "3:", "hostDevices['a'].mdev.uuids[0]: 'not-a-uuid' is not a UUID"),
        ("{mdev: {type: 'nvidia 222', uuids: [" + U1 + "]}}", "3:", "'nvidia 222' is not an mdev type id"),
        ("{mdev: {uuids: [" + U1 + ", " + U1 + "]}}", "3:", f"uuids[1]: {U1} is already listed in this pool"),
        ("{mdev: {uuids: [" + U1 + "]}}\n  b: {mdev: {uuids: [" + U1 + "]}}", "4:", "in hostDevices['a']"),
        ("{pci: '0000:65:00.0', mdev: {uuids: [" + U1 + "]}}", "3:", "give exactly one of pci"),
    ],
)
def test_pool_errors_name_the_line(entry: str, where: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_host_config(f"name: h\nhostDevices:\n  a: {entry}\n".encode(), "host.yaml")
    assert message in str(err.value), str(err.value)
    assert str(err.value).startswith(f"host.yaml:{where}"), str(err.value)


def test_handing_out_is_deterministic_and_one_instance_per_vm() -> None:
    p = mdev.place([("b", need(GPU)), ("a", need(GPU, GPU))], POOLS, {})
    assert dict(p.uuids) == {"a": (U1, U2), "b": (U3,)}
    assert not p.errors


def test_a_vm_keeps_what_it_holds_and_never_takes_anothers() -> None:
    p = mdev.place([("m", need(GPU)), ("a", need(GPU))], POOLS, {"m": (U2,), "manual": (U1,)})
    assert dict(p.uuids) == {"m": (U2,), "a": (U3,)}
    # an instance that left the pool (or the host) is not kept
    gone = mdev.place([("m", need(GPU))], POOLS, {"m": (U2,)}, available={U1: "nvidia-222", U3: "nvidia-222"})
    assert dict(gone.uuids) == {"m": (U1,)}


def test_an_exhausted_pool_names_the_holders_and_what_the_host_lacks() -> None:
    available = {U1: "nvidia-222", U2: "nvidia-222", U3: "nvidia-999"}
    p = mdev.place([("a", need(GPU)), ("b", need(GPU)), ("c", need(GPU))], POOLS, {}, available, host="h1")
    assert dict(p.uuids) == {"a": (U1,), "b": (U2,)}
    assert p.errors == {
        "c": (
            FIELD,
            f"needs 1 of host h1's mediated devices '{GPU}' (3 in its pool); 0 are free, the others held by "
            f"vm/a, vm/b; not of type nvidia-222: {U3}",
        )
    }
    lacking = mdev.place([("a", need(GPU, GPU))], POOLS, {}, {U1: "nvidia-222"}, host="h1")
    assert (
        "1 are free; not on this host: " + f"{U2}, {U3} (create them, e.g. mdevctl define --auto)"
        in (lacking.errors["a"][1])
    )


def test_what_a_domain_holds_reads_back_from_its_xml() -> None:
    xml = (
        "<domain><devices><hostdev mode='subsystem' type='pci'><source><address bus='0x65'/></source></hostdev>"
        f"<hostdev mode='subsystem' type='mdev'><source><address uuid='{U2.upper()}'/></source></hostdev>"
        f"<hostdev mode='subsystem' type='mdev'><source><address uuid='{U1}'/></source></hostdev>"
        "</devices></domain>"
    )
    assert mdev.held_mdevs(xml) == (U2, U1)
    assert mdev.held_mdevs("<domain/>") == ()
    live = [LiveDomain(name="x", uuid="u", state=PowerState.SHUTOFF, persistent_xml=xml)]
    assert held_from_live(live) == Held({}, {"x": (U2, U1)})


VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory:
          guest: 512Mi
        devices:
          gpus:
            - name: vgpu
              deviceName: nvidia.com/GRID_T4-1Q
"""


def test_a_revision_hands_out_what_fits_and_names_what_does_not(git_repo: GitRepo) -> None:
    for name in ("c", "a", "b", "d"):
        git_repo.write(f"vms/{name}.yaml", VM.format(name=name))
    git_repo.commit()
    host = HostConfig(name="h1", host_devices=POOLS)
    d = desired_state(source.read_snapshot(git_repo.path), "", host, render.HostCaps.default())
    assert {r.name: mdev.held_mdevs(r.xml) for r in d.rendered} == {"a": (U1,), "b": (U2,), "c": (U3,)}
    (err,) = map(words, d.host_errors)
    assert err.startswith(f"vms/d.yaml:15:15: vm/d: {FIELD}: cannot run on host h1: needs 1 of host h1's")
    assert "the others held by vm/a, vm/b, vm/c" in err
    assert d.failed == (VMKey("default", "d"),)
    # The next revision, read back from the host: a VM sorted first arrives; b and d leave
    # git, but b's domain is still on the host (not pruned yet) and keeps its instance.
    live = [
        LiveDomain(name=r.name, uuid=r.uuid, state=PowerState.SHUTOFF, persistent_xml=r.xml)
        for r in d.rendered
    ]
    git_repo.write("vms/0.yaml", VM.format(name="a0"))
    git_repo.remove("vms/d.yaml")
    git_repo.remove("vms/b.yaml")
    git_repo.commit()
    facts = HostFacts(host="h1", mdevs=tuple((u, "nvidia-222") for u in (U1, U2, U3)))
    snapshot = source.read_snapshot(git_repo.path)
    again = desired_state(
        snapshot, "", host, render.HostCaps.default(), facts=facts, held=held_from_live(live)
    )
    assert {r.name: mdev.held_mdevs(r.xml) for r in again.rendered} == {"a": (U1,), "c": (U3,)}
    (err,) = map(words, again.host_errors)
    assert err.startswith(f"vms/0.yaml:15:15: vm/a0: {FIELD}: cannot run on host h1: ")
    assert "the others held by vm/a, vm/b, vm/c" in err
    # Once b's domain is gone, a0 gets its instance; a and c stay put.
    pruned = [x for x in live if x.name != "b"]
    third = desired_state(
        snapshot, "", host, render.HostCaps.default(), facts=facts, held=held_from_live(pruned)
    )
    assert third.all_errors == ()
    assert {r.name: mdev.held_mdevs(r.xml) for r in third.rendered} == {"a0": (U2,), "a": (U1,), "c": (U3,)}


def test_another_hosts_vm_takes_nothing_of_this_hosts_pool(git_repo: GitRepo) -> None:
    elsewhere = VM.format(name="a").replace(
        "    spec:\n", "    spec:\n      nodeSelector: {kubernetes.io/hostname: h2}\n", 1
    )
    git_repo.write("vms/a.yaml", elsewhere)
    git_repo.write("vms/b.yaml", VM.format(name="b"))
    git_repo.commit()
    host = HostConfig(name="h1", host_devices={GPU: HostDevice("mdev", "", (U1,))})
    d = desired_state(source.read_snapshot(git_repo.path), "", host, render.HostCaps.default())
    assert d.all_errors == ()
    assert {r.name: mdev.held_mdevs(r.xml) for r in d.rendered} == {"a": (), "b": (U1,)}


def test_a_pull_request_adding_a_vm_moves_no_other_instance(git_repo: GitRepo) -> None:
    for name in ("b", "c"):
        git_repo.write(f"vms/{name}.yaml", VM.format(name=name))
    base = git_repo.commit("base")
    git_repo.write("vms/a.yaml", VM.format(name="a"))
    head = git_repo.commit("head: a vGPU VM sorted first")
    host = HostConfig(name="h1", host_devices=POOLS)
    d = prdiff.diff_snapshots(
        source.read_snapshot(git_repo.path, base),
        source.read_snapshot(git_repo.path, head),
        "",
        host,
        render.HostCaps.default(),
    )
    assert d.errors == ()
    assert [(e.name, e.action) for e in d.vms] == [("a", "create")]
    assert d.unchanged == 2  # b and c keep U1 and U2; a gets U3


def vm(devices: dict[str, Any]) -> ExpandedVM:
    obj = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "cad", "namespace": "default"},
        "spec": {"template": {"spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": devices}}}},
    }
    return ExpandedVM(vm=obj, source=Manifest(obj, "vms/cad.yaml", 1))


def hostdevs(devices: dict[str, Any], host: HostConfig | None = None) -> list[str]:
    xml = render_domain(vm(devices), host or HostConfig(host_devices=POOLS), HostCaps.default()).xml
    return [line.strip() for line in xml.splitlines() if "<hostdev" in line]


def gpu(display: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "g", "deviceName": GPU}
    if display is not None:
        out["virtualGPUOptions"] = {"display": display}
    return out


PLAIN = '<hostdev mode="subsystem" type="mdev" managed="no" model="vfio-pci">'
RAMFB = '<hostdev mode="subsystem" type="mdev" managed="no" model="vfio-pci" display="on" ramfb="on">'
DISPLAY = '<hostdev mode="subsystem" type="mdev" managed="no" model="vfio-pci" display="on">'


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ([gpu(), gpu()], [RAMFB, PLAIN]),  # KubeVirt's default: the first vGPU shows the display
        ([gpu(), gpu({})], [PLAIN, RAMFB]),  # one GPU sets it: only that one
        ([gpu({"enabled": False})], [PLAIN]),
        ([gpu({"ramFB": {"enabled": False}})], [DISPLAY]),
    ],
)
def test_vgpu_display_as_kubevirt_sets_it(gpus: list[dict[str, Any]], expected: list[str]) -> None:
    assert hostdevs({"gpus": gpus}) == expected


def test_vgpu_display_needs_graphics_and_one_framebuffer() -> None:
    assert hostdevs({"gpus": [gpu()], "autoattachGraphicsDevice": False}) == [PLAIN]  # no default display
    with pytest.raises(
        RenderError, match=r"gpus\[0\].virtualGPUOptions.display: a vGPU display needs a graphics"
    ):
        hostdevs({"gpus": [gpu({})], "autoattachGraphicsDevice": False})
    with pytest.raises(RenderError, match="configuring multiple displays with ramfb is not valid"):
        hostdevs({"gpus": [gpu({}), gpu({})]})


def test_display_options_on_a_whole_gpu_have_no_effect() -> None:
    host = HostConfig(host_devices={GPU: HostDevice("pci", "0000:65:00.0")})
    d = render_domain(vm({"gpus": [gpu({})]}), host, HostCaps.default())
    assert tuple(map(words, d.warnings)) == (
        "vm/cad: spec.template.spec.domain.devices.gpus[0].virtualGPUOptions: has no effect: "
        "display options are for mediated devices",
    )
    assert 'display="on"' not in d.xml
