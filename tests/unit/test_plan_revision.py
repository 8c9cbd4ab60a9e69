"""A revision's plan for one host (plan/revision.py): the revision's warnings, the ones
``validate`` shows, are in the plan ahead of its own; a VM pinned to an older
instancetype revision gets the newer-revision note, in any namespace."""

from __future__ import annotations

from reconciler.catalog import build_catalog
from reconciler.desired import desired_from_catalog
from reconciler.expand import revision_info
from reconciler.manifests import parse_documents
from reconciler.model import RevisionInfo, Severity, VMKey
from reconciler.plan.revision import plan_host
from reconciler.plan.text import format_plan
from reconciler.render import HostCaps
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.problems import group, words

INSTANCETYPE = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {{name: small}}
spec: {{cpu: {{guest: {cpus}}}, memory: {{guest: 64Mi}}}}
"""

PREFERENCE = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata: {name: old}
spec: {cpu: {preferredCPUTopology: preferSockets}}
"""

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  runStrategy: Halted
  instancetype: {{name: small}}
  preference: {{name: old}}
  template: {{spec: {{domain: {{devices: {{}}}}}}}}
"""

NOTE = "instancetype small: a newer revision is in the repository"


def captured(cpus: int) -> RevisionInfo:
    (doc,) = parse_documents(INSTANCETYPE.format(cpus=cpus).encode(), "types.yaml")
    return revision_info(doc.obj, "")


def test_a_vm_pinned_to_an_older_revision_gets_the_note_in_any_namespace() -> None:
    text = "---\n".join(
        [
            INSTANCETYPE.format(cpus=2),
            PREFERENCE,
            VM.format(name="web", namespace="default"),
            VM.format(name="web", namespace="team"),
            VM.format(name="db", namespace="team"),
        ]
    )
    files = {"all.yaml": text.encode()}
    cat = build_catalog(parse_documents(files["all.yaml"], "all.yaml"), files.__getitem__)
    old = {"instancetype": captured(1)}
    pins = {VMKey("default", "web"): old, VMKey("team", "web"): old}  # db follows the repository
    desired = desired_from_catalog(cat, "c" * 40, files.__getitem__, HostConfig(), HostCaps.default(), pins)
    assert not desired.errors, desired.errors
    plan = plan_host(desired, [], PlanPolicy())
    notes = {w.vm: w for w in plan.warnings if NOTE in w.message}
    assert set(notes) == {VMKey("default", "web"), VMKey("team", "web")}
    assert all(w.severity == Severity.WARNING for w in notes.values())
    (line,) = [line for line in format_plan(plan).splitlines() if NOTE in line]
    assert line.startswith(f"  warning: {NOTE}")
    assert line.endswith("(2 VMs: vm/web, vm/team_web)")  # one line per cause, as validate says it
    alone = plan_host(
        desired_from_catalog(
            cat, "c" * 40, files.__getitem__, HostConfig(), HostCaps.default(), {VMKey("team", "web"): old}
        ),
        [],
        PlanPolicy(),
    )
    assert f"  warning: vm/team_web: {NOTE}" in format_plan(alone)


def test_the_plan_carries_the_warnings_validate_shows_first() -> None:
    text = "---\n".join(
        [INSTANCETYPE.format(cpus=1), PREFERENCE]
        + [VM.format(name=f"vm{i}", namespace="default") for i in range(3)]
    )
    files = {"all.yaml": text.encode()}
    cat = build_catalog(parse_documents(files["all.yaml"], "all.yaml"), files.__getitem__)
    desired = desired_from_catalog(cat, "c" * 40, files.__getitem__, HostConfig(), HostCaps.default())
    assert any("preferSockets is deprecated" in words(w) for w in desired.warnings)
    plan = plan_host(desired, [], PlanPolicy())
    assert plan.warnings[: len(desired.warnings)] == desired.warnings
    grouped = group(desired.warnings)
    assert [line for line in grouped if "preferSockets" in line] == [
        line for line in group(plan.warnings) if "preferSockets" in line
    ]
    assert any("(3 VMs: vm/vm0, vm/vm1, vm/vm2)" in line for line in grouped), grouped
    for line in grouped:
        assert f"  warning: {line}" in format_plan(plan)
