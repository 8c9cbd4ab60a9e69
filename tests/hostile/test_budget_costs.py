"""What the input budgets let in costs little: work proportional to the input, counted.

Covers: a VM naming the most Secrets a VM may (``MAX_SECRETS_PER_VM``) has each Secret
digested once, with scrypt at most 1 MiB of work each and never 200,000 rounds of
PBKDF2 (0.1 s a Secret: 4096 Secrets, the revision's budget, took 7 minutes); a
kustomization of 300 JSON 6902 patches on one VM is composed for positions once, not
once per patch (1000 patches took 38 s, the square of the file); the patches apply
(the VM carries every annotation they add). Counts, not times: ``bench/budgets`` prints
the times of the worst case inside the budgets. In-process.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import pytest

from reconciler import overlays
from reconciler.catalog import build_catalog
from reconciler.expand import expand_vm
from reconciler.manifests import limits, parse_documents
from reconciler.manifests import positions as positions_module
from reconciler.manifests.reader import NodeLoader
from reconciler.source.files import DirView

if TYPE_CHECKING:
    from pathlib import Path


def _vm_naming(secrets: int) -> bytes:
    creds = "".join(
        f"        - sshPublicKey:\n"
        f"            source: {{secret: {{secretName: key-{k}}}}}\n"
        f"            propagationMethod: {{noCloud: {{}}}}\n"
        for k in range(secrets)
    )
    docs = [
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: key-{k}\nstringData:\n  key: ssh-ed25519 AAAA{k}\n"
        for k in range(secrets)
    ]
    docs.append(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm\nspec:\n"
        "  template:\n    spec:\n      accessCredentials:\n" + creds + "      domain:\n"
        "        memory: {guest: 64Mi}\n        devices: {}\n"
        "      volumes:\n        - name: ci\n          cloudInitNoCloud: {userData: '#cloud-config'}\n"
    )
    return "---\n".join(docs).encode()


def test_secret_digests_cost_a_little_work_each(monkeypatch: pytest.MonkeyPatch) -> None:
    work: list[int] = []
    real = hashlib.scrypt

    def counted(password: bytes, *, salt: bytes, n: int, r: int, p: int, **rest: Any) -> bytes:
        work.append(n * r * p * 128)  # bytes scrypt mixes: its memory and time
        return real(password, salt=salt, n=n, r=r, p=p, **rest)

    monkeypatch.setattr(hashlib, "scrypt", counted)
    monkeypatch.setattr(hashlib, "pbkdf2_hmac", lambda *a, **k: pytest.fail("PBKDF2 derived"))
    catalog = build_catalog(parse_documents(_vm_naming(limits.MAX_SECRETS_PER_VM), "vm.yaml"))
    (vm,) = catalog.vms
    data = expand_vm(vm, catalog).secrets
    assert len({data.digest(name) for name in data.names()}) == limits.MAX_SECRETS_PER_VM
    assert len(work) == limits.MAX_SECRETS_PER_VM
    assert max(work) <= 1 << 20


def test_a_kustomization_of_many_patches_is_composed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patches = 300
    (tmp_path / "vm.yaml").write_text(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: web\n"
        "spec:\n  template:\n    metadata: {annotations: {}}\n    spec: {domain: {devices: {}}}\n"
    )
    entries = "".join(
        "- target: {kind: VirtualMachine, name: web}\n  patch: |-\n"
        f"    - op: add\n      path: /spec/template/metadata/annotations/n{i}\n      value: v{i}\n"
        for i in range(patches)
    )
    (tmp_path / "kustomization.yaml").write_text("resources: [vm.yaml]\npatches:\n" + entries)
    composed: list[bytes] = []
    real = NodeLoader

    def counting(data: bytes) -> Any:
        composed.append(data)
        return real(data)

    monkeypatch.setattr(positions_module, "NodeLoader", counting)
    (vm,) = overlays.build(DirView(str(tmp_path)), "")
    assert len(vm.obj["spec"]["template"]["metadata"]["annotations"]) == patches
    kustomization = (tmp_path / "kustomization.yaml").read_bytes()
    assert composed.count(kustomization) <= 1  # each patch's own text is composed once, as its own
