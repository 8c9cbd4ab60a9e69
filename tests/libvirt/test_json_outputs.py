"""Every ``-o json`` of the CLI against the JSON Schema shipped for it (test:///default).

Covers: the schemas in ``reconciler/data/schemas`` are valid JSON Schemas whose every
property name is camelCase; ``validate``, ``diff``, ``plan``, ``apply``, ``status``,
``host-facts`` and ``import`` print documents that carry ``schemaVersion`` and follow
their schema exactly (no key the schema does not name), on good revisions and on
broken ones (errors are objects with file and line, as in the PR diff); a plan's
changes and the PR diff's name a field change with the same keys; the PR diff's
golden JSON files follow the diff schema too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor
from tests.helpers import schemas
from tests.helpers.domains import drop_domains
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

URI = "test:///default"
NAMES = ("json-a", "json-b", "json-far")
GOLDEN = Path(__file__).parent.parent / "data" / "prdiff"
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        drop_domains(h, NAMES)
        yield h
        drop_domains(h, NAMES)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str, code: int | None = None) -> Any:
    capsys.readouterr()
    got = cli.main(list(argv))
    if code is not None:
        assert got == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def far_vm(name: str) -> str:
    return vm_yaml(name).replace(
        "    spec:\n", "    spec:\n      nodeSelector: {kubernetes.io/hostname: elsewhere}\n"
    )


def property_names(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                yield from value
            yield from property_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from property_names(value)


@pytest.mark.parametrize("name", schemas.names())
def test_the_schemas_are_schemas_with_camel_case_keys(name: str) -> None:
    s = schemas.schema(name)
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["$id"].endswith(f"/{name}.schema.json")
    assert [p for p in property_names(s) if not CAMEL.match(p)] == []


def test_every_output_follows_its_schema(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git_repo.write("vms/json-a.yaml", vm_yaml("json-a"))
    git_repo.write("vms/json-far.yaml", far_vm("json-far"))
    base = git_repo.commit("a")
    repo = ["--repo", str(git_repo.path)]
    host = [*repo, "--connect", URI, "--owner", "json-test"]

    doc = run_json(capsys, "validate", *repo, "-o", "json", code=0)
    schemas.check(doc, "validate")
    assert (doc["valid"], doc["vms"]) == (True, ["json-a", "json-far"])

    doc = run_json(capsys, "plan", *host, "-o", "json", code=2)
    schemas.check(doc, "plan")
    (plan,) = doc["plans"]
    assert plan["otherHosts"] == [{"subject": "vm/json-far", "name": "json-far", "host": "elsewhere"}]
    (create,) = plan["changes"]
    assert create["action"] == "create"
    assert any(a.startswith("memory") for a in create["attributes"])

    schemas.check(run_json(capsys, "apply", *host, "--yes", "-o", "json", code=0), "plan")

    git_repo.write("vms/json-a.yaml", vm_yaml("json-a", memory="128Mi"))
    git_repo.write("vms/json-b.yaml", vm_yaml("json-b"))
    git_repo.commit("b")
    doc = run_json(capsys, "plan", *host, "-o", "json", code=2)
    schemas.check(doc, "plan")
    changed = next(c for c in doc["plans"][0]["changes"] if c["name"] == "json-a")
    diff = run_json(capsys, "diff", base, *repo, "-o", "json", code=2)
    schemas.check(diff, "diff")
    in_diff = next(v for v in diff["vms"] if v["name"] == "json-a")
    assert [c["field"] for c in changed["changes"]] == [c["field"] for c in in_diff["changes"]]
    assert {c["after"] for c in changed["changes"]} == {"128Mi"}
    assert set(changed["changes"][0]) == set(in_diff["changes"][0])

    state = tmp_path / "state"
    assert cli.main([*["run", "--once", *host], "--state-dir", str(state), "--listen", ""]) == 0
    doc = run_json(capsys, "status", "--state-dir", str(state), "--connect", URI, "-o", "json", code=0)
    schemas.check(doc, "status")
    assert {v["name"] for v in doc["vms"]} >= {"json-a", "json-b"}

    schemas.check(run_json(capsys, "host-facts", "--connect", URI, "-o", "json", code=0), "host-facts")
    doc = run_json(
        capsys,
        *["import", "--connect", URI, "test", "--output-dir", str(tmp_path / "imported"), "--no-git"],
        "-o",
        "json",
    )
    schemas.check(doc, "import")

    # A broken revision: its errors are objects with file and line, in every output.
    git_repo.write("vms/json-b.yaml", vm_yaml("json-b", memory="lots"))
    git_repo.commit("broken")
    for argv, name in (
        (["validate", *repo], "validate"),
        (["plan", *host], "plan"),
        (["diff", base, *repo], "diff"),
    ):
        doc = run_json(capsys, *argv, "-o", "json", code=1)
        schemas.check(doc, name)
        errors = doc["errors"] if name != "plan" else doc["plans"][0]["errors"]
        assert errors, (name, doc)
        assert errors[0]["path"] == "vms/json-b.yaml", errors[0]
        assert errors[0]["line"], errors[0]


@pytest.mark.parametrize("case", sorted(p.name for p in GOLDEN.iterdir() if (p / "diff.json").exists()))
def test_the_pr_diff_goldens_follow_the_schema(case: str) -> None:
    text = (GOLDEN / case / "diff.json").read_text()  # commits stand as <base> and <head> there
    schemas.check(json.loads(text.replace("<base>", "b" * 40).replace("<head>", "c" * 40)), "diff")
