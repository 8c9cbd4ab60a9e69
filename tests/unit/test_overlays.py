"""Overlay engine: kustomize-compatible builds.

Covers: the kustomize conformance corpus (expected outputs from kustomize 5.5.0) built
through a DirView; a differential check against ``kubectl kustomize`` on our own trees
in tests/data/overlays/differential (skipped without kubectl); errors naming the
kustomization file and line; the safety rule (nothing above the root, symlinks out of
it, no remote bases, no plugins); kustomization string fields read with YAML 1.1
booleans as kustomize reads them; plain directories without a kustomization; the build
cache (a rebuild sees a changed file and a changed patch, reuses unchanged objects and
leaves earlier results untouched); replacement values keep the target field's type
as kustomize gives it (the ``replacement-typed-*`` differential cases, also checked
without kubectl), and a value the target's type cannot hold is an error at its line.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from reconciler import manifests, overlays
from reconciler.errors import ManifestError, OverlayError
from reconciler.overlays.cache import OverlayCache
from reconciler.overlays.resource import Res
from reconciler.source import DirView
from tests.helpers.files import MemView
from tests.helpers.manifests import VM

DATA = Path(__file__).resolve().parents[1] / "data" / "overlays"
CORPUS = sorted(p for p in (DATA / "kustomize-corpus").iterdir() if (p / "ENTRY").exists())
DIFFERENTIAL = sorted(p for p in (DATA / "differential").iterdir() if (p / "ENTRY").exists())


def docs_of(text: str) -> list[object]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def built_text(view: object, entry: str, cache: OverlayCache | None = None) -> str:
    return manifests.dump_documents(m.obj for m in overlays.build(view, entry, cache=cache or OverlayCache()))  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CORPUS, ids=lambda p: p.name)
def test_corpus_case_matches_kustomize(case: Path) -> None:
    entry = (case / "ENTRY").read_text().strip()
    entry = "" if entry == "." else entry
    if (case / "expected-error.txt").exists():
        with pytest.raises(ManifestError) as err:
            overlays.build(DirView(case), entry, cache=OverlayCache())
        assert err.value.path, "errors name a file"
        return
    got = docs_of(built_text(DirView(case), entry))
    assert got == docs_of((case / "expected.yaml").read_text())


@pytest.mark.parametrize("case", DIFFERENTIAL + CORPUS[:21], ids=lambda p: p.name)
def test_same_output_as_kubectl_kustomize(case: Path, tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: no reference kustomize to compare with")
    tree = tmp_path / "tree"
    shutil.copytree(case, tree)
    entry = (case / "ENTRY").read_text().strip()
    proc = subprocess.run(
        [kubectl, "kustomize", str(tree / entry)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        with pytest.raises(ManifestError):
            overlays.build(DirView(tree), "" if entry == "." else entry, cache=OverlayCache())
        return
    assert built_text(DirView(tree), "" if entry == "." else entry) == proc.stdout  # byte for byte


def fleet(**extra: str) -> dict[str, str]:
    files = {
        "base/kustomization.yaml": "resources:\n- vm-a.yaml\n- vm-b.yaml\n",
        "base/vm-a.yaml": VM.format(name="vm-a"),
        "base/vm-b.yaml": VM.format(name="vm-b"),
        "prod/kustomization.yaml": (
            "resources:\n- ../base\nnamePrefix: prod-\npatches:\n- path: halt.yaml\n"
        ),
        "prod/halt.yaml": "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm-b\nspec:\n  runStrategy: Halted\n",
    }
    files.update(extra)
    return files


def test_overlay_applies_prefix_and_patch_with_source_positions() -> None:
    out = overlays.build(MemView(fleet()), "prod", cache=OverlayCache())
    assert [(m.name, m.obj["spec"]["runStrategy"], m.path, m.line) for m in out] == [
        ("prod-vm-a", "Always", "base/vm-a.yaml", 1),
        ("prod-vm-b", "Halted", "base/vm-b.yaml", 1),
    ]


def test_patch_without_target_names_kustomization_line() -> None:
    view = MemView(
        fleet(
            **{"prod/halt.yaml": "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: web\n"}
        )
    )
    with pytest.raises(OverlayError) as err:
        overlays.build(view, "prod", cache=OverlayCache())
    assert str(err.value).startswith("prod/kustomization.yaml:5:3: no resource matches strategic merge patch")
    assert "VirtualMachine.v1.kubevirt.io/web" in str(err.value)


def test_missing_resource_names_the_entry() -> None:
    view = MemView(fleet(**{"base/kustomization.yaml": "resources:\n- vm-a.yaml\n- gone.yaml\n"}))
    with pytest.raises(OverlayError) as err:
        overlays.build(view, "base", cache=OverlayCache())
    assert (err.value.path, err.value.line, err.value.column) == ("base/kustomization.yaml", 3, 3)
    assert "gone.yaml" in err.value.message


@pytest.mark.parametrize(
    ("kustomization", "message"),
    [
        ("resources:\n- ../../outside\n", "leaves the repository root"),
        ("resources:\n- https://github.com/example/repo//base?ref=main\n", "remote resource"),
        ("resources:\n- github.com/example/repo/base\n", "remote resource"),
        ("transformers:\n- plugin.yaml\n", "no plugins"),
        ("generators:\n- gen.yaml\n", "no plugins"),
        ("resources:\n- ../base/vm-a.yaml\n", "is not in or below"),
        ("patches:\n- path: ../base/vm-a.yaml\n", "is not in or below"),
        ("bogusField: 1\n", "unknown kustomization field"),
    ],
)
def test_safety_rule_refuses(kustomization: str, message: str) -> None:
    plugin = "apiVersion: someteam.example.com/v1\nkind: ChartInflator\nmetadata:\n  name: x\n"
    view = MemView(
        fleet(
            **{"prod/kustomization.yaml": kustomization, "prod/plugin.yaml": plugin, "prod/gen.yaml": plugin}
        )
    )
    with pytest.raises(OverlayError) as err:
        overlays.build(view, "prod", cache=OverlayCache())
    assert message in str(err.value)
    assert err.value.path == "prod/kustomization.yaml"


def test_plain_directory_reads_every_yaml_file_in_path_order() -> None:
    view = MemView(
        {"vms/b.yml": VM.format(name="b"), "vms/a.yaml": VM.format(name="a"), "vms/notes.txt": "x"}
    )
    out = overlays.build(view, "vms", cache=OverlayCache())
    assert [(m.name, m.path) for m in out] == [("a", "vms/a.yaml"), ("b", "vms/b.yml")]


def test_rebuild_sees_changed_file_and_leaves_earlier_results_alone() -> None:
    cache = OverlayCache()
    files = fleet()
    first = overlays.build(MemView(files), "prod", cache=cache)
    snapshot = copy.deepcopy([m.obj for m in first])
    files["base/vm-a.yaml"] = files["base/vm-a.yaml"].replace("Always", "Manual")
    second = overlays.build(MemView(files), "prod", cache=cache)
    assert [m.obj["spec"]["runStrategy"] for m in second] == ["Manual", "Halted"]
    assert [m.obj for m in first] == snapshot
    assert cache.hits > 0, "the unchanged VM came from the cache"
    files["prod/halt.yaml"] = files["prod/halt.yaml"].replace("Halted", "Once")
    third = overlays.build(MemView(files), "prod", cache=cache)
    assert [m.obj["spec"]["runStrategy"] for m in third] == ["Manual", "Once"]


def test_warm_and_cold_builds_agree() -> None:
    case = DATA / "differential" / "vm-fleet-components"
    cache = OverlayCache()
    warm1 = built_text(DirView(case), "overlays/site", cache)
    warm2 = built_text(DirView(case), "overlays/site", cache)
    cold = built_text(DirView(case), "overlays/site")
    assert warm1 == warm2 == cold


def test_duplicate_ids_across_bases_are_refused() -> None:
    files = fleet(
        **{
            "other/kustomization.yaml": "resources:\n- ../base\n- copy.yaml\n",
            "other/copy.yaml": VM.format(name="vm-a"),
        }
    )
    with pytest.raises(OverlayError) as err:
        overlays.build(MemView(files), "other", cache=OverlayCache())
    assert "may not add resource with an already registered id" in str(err.value)
    assert (err.value.path, err.value.line) == ("other/kustomization.yaml", 3)


def test_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    secret = tmp_path / "outside.yaml"
    secret.write_text(VM.format(name="leak"))
    (root / "app" / "vm.yaml").symlink_to(secret)
    (root / "app" / "kustomization.yaml").write_text("resources:\n- vm.yaml\n")
    with pytest.raises(OverlayError):
        overlays.build(DirView(root), "app", cache=OverlayCache())


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("commonLabels:\n  enabled: yes\n", "commonLabels"),
        ("commonAnnotations:\n  revision: 17\n", "commonAnnotations"),
    ],
)
def test_kustomization_string_fields_are_read_as_kustomize_reads_them(line: str, field: str) -> None:
    view = MemView(fleet(**{"prod/kustomization.yaml": "resources:\n- ../base\n" + line}))
    with pytest.raises(OverlayError) as err:
        overlays.build(view, "prod", cache=OverlayCache())
    assert field in err.value.message
    assert (err.value.path, err.value.line) == ("prod/kustomization.yaml", 4)


def test_plain_directory_rebuild_uses_the_cache() -> None:
    cache = OverlayCache()
    files = {f"vms/{n}.yaml": VM.format(name=n) for n in ("a", "b", "c")}
    first = overlays.build(MemView(files), "vms", cache=cache)
    files["vms/b.yaml"] = VM.format(name="b2")
    second = overlays.build(MemView(files), "vms", cache=cache)
    assert [m.name for m in second] == ["a", "b2", "c"]
    assert second[0].obj is first[0].obj
    assert second[2].obj is first[2].obj


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: c, image: i}]
"""


@pytest.mark.parametrize(
    ("overlay", "selector_env"),
    [
        ("labels:\n- pairs: {env: prod}\n", "prod"),  # written in place over the linked value
        (
            "patches:\n- patch: |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n"
            "      name: web\n      labels: {env: prod}\n",
            "prod",
        ),
        (
            "patches:\n- target: {kind: Deployment}\n  patch: |-\n    - op: replace\n"
            "      path: /metadata/labels/env\n      value: prod\n",
            "dev",  # a JSON patch works on a copy: the link is cut
        ),
    ],
)
def test_labels_written_by_one_transformer_stay_linked_as_in_kustomize(
    overlay: str, selector_env: str
) -> None:
    files = {
        "b/d.yaml": DEPLOYMENT,
        "b/kustomization.yaml": "resources: [d.yaml]\ncommonLabels: {env: dev}\n",
        "o/kustomization.yaml": "resources: [../b]\n" + overlay,
    }
    (dep,) = overlays.build(MemView(files), "o", cache=OverlayCache())
    assert dep.obj["metadata"]["labels"]["env"] == "prod"
    assert dep.obj["spec"]["selector"]["matchLabels"]["env"] == selector_env
    assert dep.obj["spec"]["template"]["metadata"]["labels"]["env"] == selector_env


def test_replacement_values_keep_the_target_type() -> None:
    """Text from a ConfigMap's data written over a number is the number (as kustomize
    writes it); over a string it stays text; a new field takes the source's value."""
    case = DATA / "differential" / "replacement-typed-scalars"
    vm = next(
        m.obj for m in overlays.build(DirView(case), "", cache=OverlayCache()) if m.kind == "VirtualMachine"
    )
    cpu = vm["spec"]["template"]["spec"]["domain"]["cpu"]
    assert (cpu["cores"], cpu["sockets"], cpu["threads"]) == (4, 31, 1000)
    assert vm["spec"]["template"]["spec"]["domain"]["devices"]["autoattachSerialConsole"] is True
    assert vm["metadata"]["labels"] == {"cores": "4", "max": 16}
    assert vm["metadata"]["annotations"] == {"cores": "4", "max": "16"}
    delimited = DATA / "differential" / "replacement-typed-delimiter"
    (_, vm) = (m.obj for m in overlays.build(DirView(delimited), "", cache=OverlayCache()))
    assert vm["spec"]["template"]["spec"]["domain"]["cpu"]["cores"] == 8
    assert vm["metadata"]["labels"]["minor"] == "8-stable"


@pytest.mark.parametrize(
    ("case", "text"),
    [
        ("replacement-typed-text-into-number", "cores: cannot decode !!str `four` as a !!int"),
        (
            "replacement-typed-number-into-bool",
            "autoattachSerialConsole: cannot decode !!int `4` as a !!bool",
        ),
        ("replacement-typed-into-null", "model: cannot decode !!str `host-model` as a !!null"),
    ],
)
def test_replacement_value_the_target_type_cannot_hold_is_an_error(case: str, text: str) -> None:
    with pytest.raises(ManifestError) as err:
        overlays.build(DirView(DATA / "differential" / case), "", cache=OverlayCache())
    assert err.value.path == "kustomization.yaml"
    assert err.value.line == 4
    assert text in str(err.value)


def test_what_kustomize_reads_leniently_is_read_so_with_a_warning_at_its_line() -> None:
    """kustomize takes the last of two equal keys and a field name in any case: so does
    the build, and each is a warning at its line (cached builds say it again)."""
    text = "resources:\n- vm-a.yaml\nnameprefix: p-\nresources:\n- vm-b.yaml\n"
    view = MemView(fleet(**{"prod/kustomization.yaml": text, "prod/vm-b.yaml": VM.format(name="vm-b")}))
    cache = OverlayCache()
    for _ in range(2):
        built = overlays.build(view, "prod", cache=cache)
        assert isinstance(built, overlays.Built)
        assert [m.obj["metadata"]["name"] for m in built] == ["p-vm-b"]
        assert [(w.path, w.line, w.column) for w in built.warnings] == [
            ("prod/kustomization.yaml", 4, 1),
            ("prod/kustomization.yaml", 3, 1),
        ]
        assert "'nameprefix' is read as 'namePrefix'" in built.warnings[1].message


def test_a_records_rarely_set_fields_survive_every_copy() -> None:
    plain = Res(
        {"kind": "ConfigMap", "metadata": {"name": "a"}}, "base/a.yaml", 3, origin=("base/a.yaml", "")
    )
    assert plain.origin == ("base/a.yaml", "")
    assert plain.prev == ()
    assert not plain.needs_hash
    hashed = replace(plain, needs_hash=True, behavior="merge")
    assert (hashed.needs_hash, hashed.behavior, hashed.origin) == (True, "merge", ("base/a.yaml", ""))
    later = hashed.but(set_by=((("data",), "k.yaml", 4),), suffixes=("-x",))
    assert (later.needs_hash, later.behavior, later.suffixes) == (True, "merge", ("-x",))
    moved = later.but(path="other.yaml")  # the origin stays the file it came from
    assert moved.origin == ("base/a.yaml", "")
    assert moved.path == "other.yaml"
    renamed = later.with_obj({"kind": "ConfigMap", "metadata": {"name": "b"}})
    assert renamed.prev == (plain.cur,)
    assert renamed.needs_hash
    assert renamed.suffixes == ("-x",)
    assert renamed.known_as(plain.key)
    assert renamed.known_as(renamed.key)
    assert not plain.known_as(renamed.key)
    assert renamed.all_keys == (plain.key, renamed.key)
