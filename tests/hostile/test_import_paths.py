"""Hostile exports: ``import --from-kubevirt`` writes below ``--output-dir`` only.

Covers: a ConfigMap, Secret, instancetype or namespace whose name is a path
(``../../../../x``, ``/abs``, ``a/b``), upper case, empty, not a string or too long
for a file name is left out with the reason at file:line, nothing is written outside
the output directory and a file already there is left as it was; a Namespace's name
is a DNS-1123 label; ``write_repository`` refuses a path that climbs out, an absolute
one, one through a symbolic link planted in the output directory and an existing
file, each before anything is written where it must not be. In-process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from reconciler import cli
from reconciler.cli import adopt
from reconciler.cli.adopt import WriteRefused, write_repository
from reconciler.importer.kubevirt import import_export
from reconciler.manifests import dump_documents

if TYPE_CHECKING:
    from pathlib import Path

LONG = "a" * 250


def _object(kind: str, name: object, namespace: object = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": meta}
    if kind in ("ConfigMap", "Secret"):
        obj["data"] = {"k": "dg=="} if kind == "Secret" else {"k": "v"}
    elif kind == "VirtualMachineClusterInstancetype":
        obj["apiVersion"] = "instancetype.kubevirt.io/v1beta1"
        meta.pop("namespace", None)
        obj["spec"] = {"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}}
    elif kind == "Namespace":
        meta.pop("namespace", None)
    return obj


@pytest.mark.parametrize(
    ("kind", "name", "namespace"),
    [
        ("ConfigMap", "../../../../x", "default"),
        ("Secret", "../../../../x", "default"),
        ("VirtualMachineClusterInstancetype", "../../../../x", None),
        ("ConfigMap", "/abs/x", "default"),
        ("ConfigMap", "a/b", "default"),
        ("ConfigMap", "Upper", "default"),
        ("ConfigMap", "", "default"),
        ("ConfigMap", 7, "default"),
        ("ConfigMap", LONG, "default"),
        ("ConfigMap", "ok", "../../../.."),
        ("ConfigMap", "ok", "a.b"),
        ("Namespace", "a.b", None),
    ],
)
def test_a_name_that_is_no_kubernetes_name_is_left_out(
    tmp_path: Path, kind: str, name: object, namespace: object
) -> None:
    export = dump_documents([{"apiVersion": "v1", "kind": "List", "items": [_object(kind, name, namespace)]}])
    result = import_export(export.encode(), "export.yaml")
    assert not result.imported
    (outcome,) = result.left_out
    assert outcome.reasons[0].startswith("export.yaml:1: metadata.")
    assert set(result.files) == {"kustomization.yaml"}


def test_the_cli_writes_nothing_outside_and_overwrites_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim.yaml"
    victim.write_text("precious\n")
    export = tmp_path / "export.yaml"
    items = [
        _object("ConfigMap", "../../../victim"),
        _object("Secret", "../../victim"),
        _object("ConfigMap", "fine"),
    ]
    export.write_text(dump_documents([{"apiVersion": "v1", "kind": "List", "items": items}]))
    out = tmp_path / "a" / "b" / "repo"
    code = cli.main(["import", "--from-kubevirt", str(export), "--output-dir", str(out), "--no-git"])
    assert code == 2  # some objects left out
    assert victim.read_text() == "precious\n"
    text = capsys.readouterr().out
    assert "is not a DNS-1123 subdomain" in text
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == [
        "a/b/repo/default/configmap-fine.yaml",
        "a/b/repo/default/kustomization.yaml",
        "a/b/repo/kustomization.yaml",
        "export.yaml",
        "victim.yaml",
    ]


@pytest.mark.parametrize("rel", ["../x.yaml", "a/../../x.yaml", "/tmp/x.yaml", "a//x.yaml", "./x.yaml"])
def test_write_repository_refuses_a_path_out_of_the_directory(tmp_path: Path, rel: str) -> None:
    out = tmp_path / "repo"
    with pytest.raises(WriteRefused, match="repository"):
        write_repository(out, {"ok.yaml": "a: 1\n", rel: "b: 2\n"}, git=False, message="m")
    assert not (out / "ok.yaml").exists()  # refused before anything is written
    assert not (tmp_path / "x.yaml").exists()


def test_write_repository_never_follows_a_planted_link(tmp_path: Path) -> None:
    """A directory of the import that is a symbolic link (planted between the emptiness
    check and the writes) is refused, as is a file that is already there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "repo"
    out.mkdir()
    root = out.resolve()

    (out / "default").symlink_to(elsewhere)
    with pytest.raises(WriteRefused):
        adopt._create_below(root, "default/x.yaml", b"a: 1\n")
    assert not any(elsewhere.iterdir())
    (out / "kustomization.yaml").write_text("mine\n")
    with pytest.raises(WriteRefused, match="never overwrites"):
        adopt._create_below(root, "kustomization.yaml", b"a: 1\n")
    assert (out / "kustomization.yaml").read_text() == "mine\n"
    (out / "link.yaml").symlink_to(tmp_path / "target.yaml")
    with pytest.raises(WriteRefused):
        adopt._create_below(root, "link.yaml", b"a: 1\n")
    assert not (tmp_path / "target.yaml").exists()
