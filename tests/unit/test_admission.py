"""KubeVirt's admission rules (reconciler/catalog/admission.py) against KubeVirt's own tests.

Covers: every case of tests/data/kubevirt-admission/cases.yaml (taken from KubeVirt's
admitter tests, each naming its test) is answered as the admission table says we
answer its rule (same refusal, warning, refused here, or not applicable); the table
covers the areas of the issue and every row cites a KubeVirt source file that exists
at the pinned commit's layout; at least 150 cases; an admission refusal is an error at
the field's file:line and a warning keeps the VM; no message of ours recommends an
interface form the pinned KubeVirt refuses or that its schema lacks.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from reconciler import manifests
from reconciler.catalog import admission, build_catalog
from reconciler.catalog.rules import Ours
from reconciler.errors import ManifestError
from reconciler.render import interfaces
from reconciler.source.files import DirView
from reconciler.wording.problems import words
from tests.helpers import kubevirt_admission as ka

ROOT = Path(__file__).resolve().parents[2]
CASES = ka.load_cases()


def test_enough_cases_each_naming_its_kubevirt_test() -> None:
    assert len(CASES) >= 150
    for case in CASES:
        assert re.match(r"^[a-z/-]+/[a-z_-]+_test\.go: \S", case.test), case.test
        assert case.rule in admission.RULE_BY_ID, case.rule
        assert case.kubevirt in ("accept", "refuse")
    assert len({c.test for c in CASES}) == len(CASES)


def test_the_table_covers_the_areas_and_every_rule_has_a_case() -> None:
    areas = {r.area for r in admission.RULES}
    assert areas >= {
        "cpu/memory",
        "devices",
        "networks",
        "volumes",
        "firmware",
        "run strategies",
        "instancetypes",
    }
    assert {c.rule for c in CASES} == set(admission.RULE_BY_ID)
    assert len(admission.RULE_BY_ID) == len(admission.RULES)
    for rule in admission.RULES:
        assert rule.source.endswith(".go") or rule.source.startswith("api"), rule
        assert rule.where, rule


@pytest.mark.parametrize("case", CASES, ids=[f"{i:03d}-{c.rule}" for i, c in enumerate(CASES)])
def test_case_is_answered_as_the_table_says(case: ka.Case) -> None:
    outcome = ka.run(case)
    rule = admission.RULE_BY_ID[case.rule]
    assert outcome.as_tabled, (case.kubevirt, outcome.ours, rule.ours, outcome.messages)


def test_agreement_with_kubevirt() -> None:
    """The accept/refuse agreement (bench/admission prints it): every disagreement is a
    warning, a refusal here or a not-applicable row of the table."""
    outcomes = [ka.run(c) for c in CASES]
    for o in outcomes:
        if not o.agrees:
            assert admission.RULE_BY_ID[o.case.rule].ours != Ours.SAME, o
    assert sum(o.agrees for o in outcomes) / len(outcomes) > 0.9


def test_refusal_names_the_field_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "vm.yaml").write_text(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: a\nspec:\n"
        "  runStrategy: Always\n  template:\n    spec:\n      hostname: not.a.label\n"
        "      domain:\n        memory: {guest: 64Mi}\n"
    )
    view = DirView(tmp_path)
    with pytest.raises(ManifestError) as err:
        build_catalog(manifests.parse_documents(view.read("vm.yaml"), "vm.yaml"), view.read)
    assert (err.value.path, err.value.line) == ("vm.yaml", 9)
    assert "spec.template.spec.hostname: does not conform to the kubernetes DNS_LABEL rules" in str(err.value)


def test_a_warning_row_keeps_the_vm() -> None:
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "a"},
        "spec": {
            "runStrategy": "Always",
            "template": {
                "spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": {}, "machine": {"type": "pc"}}}
            },
        },
    }
    doc = manifests.dump_documents([vm])
    catalog = build_catalog(manifests.parse_documents(doc.encode(), "vm.yaml"))
    assert [m.name for m in catalog.vms] == ["a"]
    (warning,) = map(words, catalog.warnings)
    assert warning.startswith(
        "vm.yaml:1: VirtualMachine a: spec.template.spec.domain.machine.type: KubeVirt accepts only"
    )


def _strings(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


FORM = re.compile(r"\b([A-Za-z]+): \{\}|binding: \{name: ([A-Za-z0-9-]+)\}")


def test_no_message_recommends_a_refused_or_unknown_form() -> None:
    """Every interface form a message of ours names (``KEY: {}``, ``binding: {name: X}``)
    is one the pinned schema defines and the admission table does not refuse."""
    schema = json.loads((ROOT / "reconciler/data/kubevirt/swagger.json").read_text())["definitions"]
    iface_fields = set(schema["v1.Interface"]["properties"])
    discontinued = set(interfaces.DISCONTINUED)
    named = 0
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        for text in _strings(path):
            for key, plugin in FORM.findall(text):
                if plugin:
                    named += 1
                    assert plugin in interfaces.PLUGINS or plugin == "NAME", (path, text)
                elif key in iface_fields:
                    named += 1
                    assert key not in discontinued, (path, text)
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for line in doc.read_text().splitlines():
            for key, _plugin in FORM.findall(line):
                if key in discontinued and "discontinued" not in line:
                    raise AssertionError(f"{doc.name}: {line}")
    assert named >= 3  # the checks above saw the forms our binding messages name


def test_version_names_the_pinned_kubevirt(capsys: pytest.CaptureFixture[str]) -> None:
    from reconciler.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "KubeVirt v1.9.0-beta.0-1264-gd923fdb815 (commit d923fdb815): schema and admission rules"
    source = (ROOT / "reconciler/data/kubevirt/SOURCE.txt").read_text()
    assert admission.KUBEVIRT_COMMIT in source
    assert admission.KUBEVIRT_VERSION.split("-g")[0] in source
