"""containerDisks from a registry, resolved by the host before render and planned on
libvirt's test driver (Debian's docker-registry on loopback, ``tests/helpers/registry.py``).

Covers: with only ``registries.insecure`` naming the loopback registry, a containerDisk
``HOST:PORT/disks/...:1`` is pulled into the host's store during ``plan`` and the plan
names its manifest digest; the overlay's base is the stored file; a DataVolume
``registry`` source (``docker://``) is pulled the same way; a tag that moved upstream:
``IfNotPresent`` keeps the stored digest, ``Always`` plans the new one; ``Never`` with an
empty store is a plan error naming the VM and the image; a registry not listed as
insecure is a plan error saying to list it; an ``imagePullSecret`` (a
``kubernetes.io/dockerconfigjson`` Secret of the repository) lets the plan pull from a
registry with basic auth, a wrong password is a plan error, and the password shows in
no error, plan text or saved plan; a SOPS-encrypted pull Secret, decrypted with the
host's keys, works the same; a DataVolume ``registry`` source's ``certConfigMap`` is the
CA its TLS registry is verified with (without it, the plan error says so); a
containerDisk whose qcow2 has a backing file (``/etc/passwd``) is a plan error naming the
VM, the image and "backing file", and nothing is stored; a refusal is a permanent plan
error, a registry that is down a transient one.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
from typing import TYPE_CHECKING, Any

import yaml

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.plan import saved
from reconciler.plan.text import format_plan
from reconciler.reconcile import plan_revision
from reconciler.settings.host import HostConfig
from reconciler.settings.images import ImageStoreConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.registries import Registries
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from reconciler.wording.problems import words
from tests.helpers.registry import Registry, disk_layer, dockerconfigjson, image_layout, push, tiny_qcow2
from tests.helpers.sops import age_key, encrypt

if TYPE_CHECKING:
    from pathlib import Path

URI = "test:///default"


def vm(name: str, image: str, **disk: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": "Halted",
            "template": {
                "spec": {
                    "domain": {
                        "memory": {"guest": "64Mi"},
                        "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
                    },
                    "volumes": [{"name": "root", "containerDisk": {"image": image, **disk}}],
                }
            },
        },
    }


def repo(tmp_path: Path, *docs: dict[str, Any]) -> SourceSnapshot:
    d = tmp_path / "repo"
    (d / "vms").mkdir(parents=True, exist_ok=True)
    for m in docs:
        (d / "vms" / f"{m['kind'].lower()}-{m['metadata']['name']}.yaml").write_text(yaml.safe_dump(m))
    return SourceSnapshot(repo=str(d), ref="HEAD", commit="e" * 40, files=DirView(str(d)))


def host(tmp_path: Path, *insecure: str) -> HostConfig:
    return HostConfig(
        name="h1",
        allowed_dirs=(str(tmp_path),),
        volume_dir=str(tmp_path / "volumes"),
        image_store=ImageStoreConfig(str(tmp_path / "store")),
        storage_pool="default-pool",
        registries=Registries(insecure=insecure),
    )


def plan(snap: SourceSnapshot, config: HostConfig) -> Any:
    with Hypervisor(URI) as hv:
        return plan_revision(snap, "vms", HostTarget(URI, config, PlanPolicy(host="h1")), hv)


def pushed(registry: Registry, tmp_path: Path, ref: str, name: str = "tiny.qcow2") -> str:
    layout = tmp_path / "layouts" / f"{ref.replace('/', '_')}-{name}"
    digest = image_layout(layout, [disk_layer(tiny_qcow2(tmp_path), name)])
    push(layout, registry, ref)
    return digest


def test_a_container_disk_is_pulled_and_planned_with_its_digest(
    plain_registry: Registry, tmp_path: Path
) -> None:
    digest = pushed(plain_registry, tmp_path, "plan/tiny:1")
    image = f"{plain_registry.host}/plan/tiny:1"
    planned = plan(repo(tmp_path, vm("rtest-reg-web", image)), host(tmp_path, plain_registry.host))
    assert not planned.errors, [words(e) for e in planned.errors]
    assert f"image {image} → {digest}" in format_plan(planned.plan)
    (change,) = planned.plan.changes
    assert change.desired is not None
    (vol,) = [v for v in change.desired.volumes if v.image]
    assert (vol.image, vol.digest) == (image, digest)
    assert vol.backing.startswith(str(tmp_path / "store" / "sha256") + "/")


def test_a_data_volume_registry_source(plain_registry: Registry, tmp_path: Path) -> None:
    digest = pushed(plain_registry, tmp_path, "plan/dv:1")
    url = f"docker://{plain_registry.host}/plan/dv:1"
    m = vm("rtest-reg-dv", "unused")
    m["spec"]["dataVolumeTemplates"] = [
        {
            "metadata": {"name": "dv-root"},
            "spec": {
                "source": {"registry": {"url": url}},
                "storage": {"resources": {"requests": {"storage": "64Mi"}}},
            },
        }
    ]
    m["spec"]["template"]["spec"]["volumes"] = [{"name": "root", "dataVolume": {"name": "dv-root"}}]
    planned = plan(repo(tmp_path, m), host(tmp_path, plain_registry.host))
    assert not planned.errors, [words(e) for e in planned.errors]
    assert f"→ {digest}" in format_plan(planned.plan)


def test_pull_policies_across_plans(plain_registry: Registry, tmp_path: Path) -> None:
    first = pushed(plain_registry, tmp_path, "plan/moving:1")
    image = f"{plain_registry.host}/plan/moving:1"
    config = host(tmp_path, plain_registry.host)
    assert f"→ {first}" in format_plan(plan(repo(tmp_path, vm("rtest-reg-mv", image)), config).plan)
    moved = pushed(plain_registry, tmp_path, "plan/moving:1", "v2.qcow2")
    kept = plan(repo(tmp_path, vm("rtest-reg-mv", image, imagePullPolicy="IfNotPresent")), config)
    assert f"→ {first}" in format_plan(kept.plan)
    again = plan(repo(tmp_path, vm("rtest-reg-mv", image, imagePullPolicy="Always")), config)
    assert f"→ {moved}" in format_plan(again.plan)
    never = plan(
        repo(tmp_path / "other", vm("rtest-reg-nv", image, imagePullPolicy="Never")), host(tmp_path / "other")
    )
    (error,) = [words(e) for e in never.errors]
    assert "vm/rtest-reg-nv" in error
    assert image in error
    assert "Never" in error


def test_a_registry_not_listed_insecure_is_a_plan_error(plain_registry: Registry, tmp_path: Path) -> None:
    pushed(plain_registry, tmp_path, "plan/strict:1")
    image = f"{plain_registry.host}/plan/strict:1"
    planned = plan(repo(tmp_path, vm("rtest-reg-strict", image)), host(tmp_path))
    (error,) = [words(e) for e in planned.errors]
    assert "vm/rtest-reg-strict" in error
    assert f"list {plain_registry.host} under registries.insecure" in error
    assert not planned.errors[0].transient  # waits for a new revision or host config


def test_a_registry_that_is_down_is_a_transient_plan_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{s.getsockname()[1]}"  # nothing listens once it is closed
    planned = plan(repo(tmp_path, vm("rtest-reg-down", f"{down}/disks/tiny:1")), host(tmp_path, down))
    (error,) = planned.errors
    assert "vm/rtest-reg-down" in words(error)
    assert "connection refused" in words(error)
    assert error.transient  # the daemon retries it with back-off


def secret(name: str, config_json: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(config_json).decode()},
    }


def test_image_pull_secret(auth_registry: Registry, tmp_path: Path) -> None:
    assert auth_registry.auth is not None
    password = auth_registry.auth[1]
    digest = pushed(auth_registry, tmp_path, "private/tiny:1")
    image = f"{auth_registry.host}/private/tiny:1"
    config = host(tmp_path, auth_registry.host)
    good = repo(
        tmp_path / "good",
        vm("rtest-reg-auth", image, imagePullSecret="pull"),
        secret("pull", dockerconfigjson(auth_registry)),
    )
    planned = plan(good, config)
    assert not planned.errors, [words(e) for e in planned.errors]
    text = format_plan(planned.plan)
    assert f"image {image} → {digest}" in text
    dump = saved.dump([planned])
    wrong = dockerconfigjson(auth_registry, password="x" + password)
    bad = repo(tmp_path / "bad", vm("rtest-reg-auth", image, imagePullSecret="pull"), secret("pull", wrong))
    refused = plan(bad, host(tmp_path / "fresh", auth_registry.host))
    (error,) = [words(e) for e in refused.errors]
    assert "refused the credentials (imagePullSecret)" in error
    none = plan(
        repo(tmp_path / "none", vm("rtest-reg-anon", image)), host(tmp_path / "fresh2", auth_registry.host)
    )
    (anon,) = [words(e) for e in none.errors]
    assert "refused the credentials (no credentials)" in anon
    for shown in (text, dump, error, anon, json.dumps([str(e) for e in refused.errors])):
        assert password not in shown


def test_image_pull_secret_sops_encrypted(auth_registry: Registry, tmp_path: Path) -> None:
    assert auth_registry.auth is not None
    password = auth_registry.auth[1]
    digest = pushed(auth_registry, tmp_path, "private/sops:1")
    image = f"{auth_registry.host}/private/sops:1"
    key = age_key(tmp_path / "keys")
    snap = repo(tmp_path / "repo", vm("rtest-reg-sops", image, imagePullSecret="pull"))
    sealed = encrypt(yaml.safe_dump(secret("pull", dockerconfigjson(auth_registry))), key.recipient)
    assert password.encode() not in sealed
    (tmp_path / "repo" / "repo" / "vms" / "secret-pull.yaml").write_bytes(sealed)
    with Hypervisor(URI) as hv:
        target = HostTarget(URI, host(tmp_path, auth_registry.host), PlanPolicy(host="h1"))
        planned = plan_revision(snap, "vms", target, hv, keys=key.keys())
    assert not planned.errors, [words(e) for e in planned.errors]
    assert f"image {image} → {digest}" in format_plan(planned.plan)


def test_a_data_volume_registry_source_trusts_its_cert_config_map(
    tls_registry: Registry, tmp_path: Path
) -> None:
    digest = pushed(tls_registry, tmp_path, "plan/tls:1")
    url = f"docker://{tls_registry.host}/plan/tls:1"
    m = vm("rtest-reg-ca", "unused")
    source = {"registry": {"url": url, "certConfigMap": "registry-ca"}}
    m["spec"]["dataVolumeTemplates"] = [
        {
            "metadata": {"name": "ca-root"},
            "spec": {"source": source, "storage": {"resources": {"requests": {"storage": "64Mi"}}}},
        }
    ]
    m["spec"]["template"]["spec"]["volumes"] = [{"name": "root", "dataVolume": {"name": "ca-root"}}]
    ca = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "registry-ca"},
        "data": {"ca.pem": tls_registry.certificate},
    }
    planned = plan(repo(tmp_path, m, ca), host(tmp_path))  # not listed under registries.insecure
    assert not planned.errors, [words(e) for e in planned.errors]
    assert f"→ {digest}" in format_plan(planned.plan)
    del source["registry"]["certConfigMap"]
    refused = plan(repo(tmp_path / "no-ca", m), host(tmp_path / "no-ca"))
    (error,) = [words(e) for e in refused.errors]
    assert "its TLS certificate is not trusted" in error


def test_a_container_disk_with_a_backing_file_is_refused(plain_registry: Registry, tmp_path: Path) -> None:
    evil = tmp_path / "evil.qcow2"
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", str(evil)], check=True
    )
    layout = tmp_path / "evil-layout"
    image_layout(layout, [disk_layer(evil.read_bytes())])
    push(layout, plain_registry, "plan/evil:1")
    image = f"{plain_registry.host}/plan/evil:1"
    planned = plan(repo(tmp_path, vm("rtest-reg-evil", image)), host(tmp_path, plain_registry.host))
    (error,) = [words(e) for e in planned.errors]
    assert "vm/rtest-reg-evil" in error
    assert image in error
    assert "backing file" in error
    stored = tmp_path / "store" / "sha256"
    assert not stored.exists() or list(stored.iterdir()) == []
