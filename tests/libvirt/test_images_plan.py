"""Images resolved by the host before render, planned on libvirt's test driver with a
local HTTP server in-process (``tests/helpers/imageserver.py``).

Covers: a DataVolume importing ``http://127.0.0.1:PORT/tiny.qcow2`` is downloaded into
the host's store during ``plan`` and the plan names it with its digest; the rendered
volume is made from the stored file; the next plan uses the store (no download); a
hostile image (backing file ``/etc/passwd``) is a plan error naming the VM, the image
and "backing file", and nothing of it is stored; the host config's ``images`` table
stays a local override consulted first; offline (no host) the reference is shown as
written; a saved plan carries the digest, and bytes that changed since are a stale plan.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from reconciler.desired import desired_state
from reconciler.host.hypervisor import Hypervisor
from reconciler.images.store import ImageStore
from reconciler.model import SourceSnapshot
from reconciler.plan import saved, verify
from reconciler.plan.output import plan_document, plans_document
from reconciler.plan.text import format_plan
from reconciler.reconcile import plan_revision
from reconciler.render import HostCaps
from reconciler.settings.host import HostConfig, ImageSource
from reconciler.settings.images import ImageStoreConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from reconciler.status import status_document, vm_statuses
from reconciler.wording.problems import words
from tests.helpers import schemas
from tests.helpers.images import incoming, qemu_img, tiny_qcow2
from tests.helpers.imageserver import ImageServer, image_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

URI = "test:///default"


def vm(name: str, url: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": "Halted",
            "dataVolumeTemplates": [
                {
                    "metadata": {"name": f"{name}-root"},
                    "spec": {
                        "source": {"http": {"url": url}},
                        "storage": {"resources": {"requests": {"storage": "64Mi"}}},
                    },
                }
            ],
            "template": {
                "spec": {
                    "domain": {
                        "memory": {"guest": "64Mi"},
                        "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
                    },
                    "volumes": [{"name": "root", "dataVolume": {"name": f"{name}-root"}}],
                }
            },
        },
    }


@pytest.fixture
def server() -> Iterator[ImageServer]:
    with image_server() as s:
        yield s


def repo(tmp_path: Path, *vms: dict[str, Any]) -> SourceSnapshot:
    d = tmp_path / "repo"
    (d / "vms").mkdir(parents=True, exist_ok=True)
    for m in vms:
        (d / "vms" / f"{m['metadata']['name']}.yaml").write_text(yaml.safe_dump(m))
    return SourceSnapshot(repo=str(d), ref="HEAD", commit="e" * 40, files=DirView(str(d)))


def host(tmp_path: Path, **kw: Any) -> HostConfig:
    return HostConfig(
        name="h1",
        allowed_dirs=(str(tmp_path),),
        volume_dir=str(tmp_path / "volumes"),
        image_store=ImageStoreConfig(str(tmp_path / "store")),
        storage_pool="default-pool",
        **kw,
    )


def plan(snap: SourceSnapshot, config: HostConfig) -> Any:
    with Hypervisor(URI) as hv:
        return plan_revision(snap, "vms", HostTarget(URI, config, PlanPolicy(host="h1")), hv)


def test_an_http_image_is_stored_and_planned_with_its_digest(tmp_path: Path, server: ImageServer) -> None:
    data = tiny_qcow2(tmp_path / "tiny.qcow2")
    server.files["/tiny.qcow2"] = data
    url = server.url("/tiny.qcow2")
    snap, config = repo(tmp_path, vm("rtest-img-web", url)), host(tmp_path)
    planned = plan(snap, config)
    assert not planned.errors, [words(e) for e in planned.errors]
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    text = format_plan(planned.plan)
    assert f"image {url} → {digest}" in text
    (change,) = planned.plan.changes
    assert change.desired is not None
    (vol,) = [v for v in change.desired.volumes if v.image]
    assert (vol.image, vol.digest) == (url, digest)
    assert vol.backing == str(tmp_path / "store" / "sha256" / digest.removeprefix("sha256:"))
    asked = len(server.requests)
    assert not plan(snap, config).errors
    assert len(server.requests) == asked  # the store holds it: no download again
    target = HostTarget(URI, config, PlanPolicy(host="h1"))
    pdoc = plans_document([plan_document(planned.plan, target, "h1")])
    schemas.check(pdoc, "plan")
    assert pdoc["plans"][0]["changes"][0]["images"] == [{"image": url, "digest": digest}]
    (row,) = vm_statuses(planned.plan, (), (), "h1")
    assert row.images == ((url, digest),)
    doc = status_document({}, [row], [])
    schemas.check(doc, "status")
    assert doc["vms"][0]["images"] == [{"image": url, "digest": digest}]


def test_a_hostile_image_is_a_plan_error_naming_vm_image_and_reason(
    tmp_path: Path, server: ImageServer
) -> None:
    evil = tmp_path / "evil.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", str(evil))
    server.files["/evil.qcow2"] = evil.read_bytes()
    url = server.url("/evil.qcow2")
    planned = plan(repo(tmp_path, vm("rtest-img-evil", url)), host(tmp_path))
    (error,) = [words(e) for e in planned.errors]
    assert "vm/rtest-img-evil" in error
    assert url in error
    assert "backing file" in error
    assert "vms/rtest-img-evil.yaml" in error
    assert not (tmp_path / "store" / "sha256").exists() or not list((tmp_path / "store" / "sha256").iterdir())


def test_the_images_table_is_consulted_first(tmp_path: Path, server: ImageServer) -> None:
    local = tmp_path / "local.qcow2"
    tiny_qcow2(local)
    url = server.url("/never-asked.qcow2")
    planned = plan(
        repo(tmp_path, vm("rtest-img-local", url)), host(tmp_path, images={url: ImageSource(str(local))})
    )
    assert not planned.errors
    assert server.requests == []
    assert f"image {url} → the local file {local}" in format_plan(planned.plan)


def test_offline_the_reference_is_shown_as_written(tmp_path: Path) -> None:
    url = "http://images.example/tiny.qcow2"
    snap = repo(tmp_path, vm("rtest-img-off", url))
    d = desired_state(snap, "vms", host(tmp_path), HostCaps.default())
    assert not d.errors
    (r,) = d.rendered
    (vol,) = [v for v in r.volumes if v.image]
    assert (vol.image, vol.digest, vol.backing) == (url, "", "")
    assert any("resolved by the host" in w.message for w in r.warnings)


def test_a_saved_plan_carries_the_digest_and_other_bytes_are_a_stale_plan(
    tmp_path: Path, server: ImageServer
) -> None:
    server.files["/tiny.qcow2"] = tiny_qcow2(tmp_path / "tiny.qcow2")
    url = server.url("/tiny.qcow2")
    snap, config = repo(tmp_path, vm("rtest-img-saved", url)), host(tmp_path)
    planned = plan(snap, config)
    text = saved.dump([planned])
    (entry,) = saved.load(text.encode(), "plan.json")
    digest = planned.plan.changes[0].desired.volumes[0].digest
    assert digest in text
    assert verify.differences(entry.doc, plan(snap, config)) == ()
    store = ImageStore(config.image_store)
    store.put(incoming(store, tiny_qcow2(tmp_path / "other.qcow2", b"OTHER-BYTES")), url)  # pulled again
    stale = verify.differences(entry.doc, plan(snap, config))
    now = ImageStore(config.image_store).lookup(url)
    assert now is not None
    assert (
        f"vm/rtest-img-saved: image {url} was planned as {digest}, this host now resolves it to {now.digest} (a stale plan)"
        in stale
    )


def test_a_store_that_cannot_be_written_is_a_plan_error(tmp_path: Path, server: ImageServer) -> None:
    server.files["/tiny.qcow2"] = tiny_qcow2(tmp_path / "tiny.qcow2")
    (tmp_path / "file").write_text("not a directory")
    config = dataclasses.replace(
        host(tmp_path), image_store=ImageStoreConfig(str(tmp_path / "file" / "store"))
    )
    planned = plan(repo(tmp_path, vm("rtest-img-nostore", server.url("/tiny.qcow2"))), config)
    (error,) = [words(e) for e in planned.errors]
    assert f"the image store {tmp_path / 'file' / 'store'}: Not a directory" in error
    assert "vm/rtest-img-nostore" in error
