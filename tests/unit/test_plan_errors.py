"""A plan's own errors and warnings about a VM are records (``model.plan_errors``), made
where the plan decides; only ``wording/plan_errors.py`` says them. Aspects: every kind
has words, each says exactly what the plan always said (the messages users and goldens
read), and the plan carries the words of the record it made (an unmanaged domain, one
of another owner, an adoption refused); the warnings of ``plan --config`` and of a
host's facts file too."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler import ownership
from reconciler.model.plan_errors import UNMANAGED, PlanError, Unplanned
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.plan_errors import said
from tests.helpers.plans import REV, live_of, rendered

_HINT = 'set annotation reconciler.kubevirt.io/adopt: "true" to take it over'
GIB = 1 << 30

WORDS = [
    (
        PlanError(Unplanned.UNMANAGED),
        f"a domain of this name exists and is not managed by the reconciler; {_HINT}",
    ),
    (
        PlanError(Unplanned.OTHER_OWNER, owner="them"),
        f"a domain of this name exists and belongs to another owner (them); {_HINT}",
    ),
    (
        PlanError(Unplanned.ADOPTION_REFUSED, owner="me", came="them"),
        "conflict: the domain belongs to owner me, which adopted it from owner them; adoption is "
        "one-time: me must release it first (remove the VM from its repository and keep the domain), "
        "and the other owner remove its adopt annotation",
    ),
    (
        PlanError(Unplanned.ADOPTION_REFUSED, owner="me", came=UNMANAGED),
        "conflict: the domain belongs to owner me, which adopted an unmanaged domain; adoption is "
        "one-time: me must release it first (remove the VM from its repository and keep the domain), "
        "and the other owner remove its adopt annotation",
    ),
    (
        PlanError(Unplanned.NOT_COMPARED, detail="unknown memory unit 'parsec'"),
        "cannot compare with the domain on this host: unknown memory unit 'parsec'",
    ),
    (
        PlanError(Unplanned.ADOPTED, came=UNMANAGED),
        "conflict: adopted from an unmanaged domain; adoption is one-time: remove the "
        "reconciler.kubevirt.io/adopt annotation (another owner whose repository still asks for this "
        "VM cannot take it back)",
    ),
    (
        PlanError(Unplanned.DISK_NOT_RESIZED, path="/v/a.qcow2", size=2 * GIB, was=GIB),
        "disk /v/a.qcow2: capacity 2Gi in git, created with 1Gi: not applied, an existing disk is "
        "never resized; grow it by hand (`qemu-img resize` while the VM is stopped, `virsh "
        "blockresize` while it runs), then the guest's partition",
    ),
    (
        PlanError(Unplanned.DISK_NOT_RESIZED, path="/v/a.qcow2", size=GIB, was=2 * GIB),
        "disk /v/a.qcow2: capacity 1Gi in git, created with 2Gi: not applied, an existing disk is "
        "never resized; a disk is never shrunk",
    ),
    (
        PlanError(Unplanned.HOST_UNKNOWN, owner="h9", path="d.yaml", names=("h1", "h2")),
        "kubernetes.io/hostname 'h9' names no host of d.yaml (hosts: h1, h2): no daemon of it runs this VM",
    ),
    (
        PlanError(Unplanned.HOST_UNKNOWN, owner="h9", path="d.yaml"),
        "kubernetes.io/hostname 'h9' names no host of d.yaml (hosts: none): no daemon of it runs this VM",
    ),
    (
        PlanError(Unplanned.NO_HOST_CLAIMS, path="d.yaml"),
        "selects no host and no host of d.yaml claims such VMs (claimUnselected): no daemon of it runs this VM",
    ),
    (
        PlanError(Unplanned.FACTS_MISSING, path="f.json"),
        "factsFile f.json is not in the repository; refresh it with "
        "`reconciler host-facts --connect URI --out f.json`",
    ),
    (
        PlanError(Unplanned.FACTS_UNREADABLE, path="f.json", detail="f.json: bad"),
        "f.json: bad; refresh it with `reconciler host-facts --connect URI --out f.json`",
    ),
    (
        PlanError(Unplanned.FACTS_STALE, path="f.json", names=("cpus", "memory")),
        "f.json no longer matches this host (differs in cpus, memory): CI checks against stale facts; "
        "refresh it with `reconciler host-facts --connect URI --out f.json`",
    ),
]


def test_every_kind_is_pinned() -> None:
    assert {e.kind for e, _ in WORDS} == set(Unplanned)


@pytest.mark.parametrize(("error", "words"), WORDS)
def test_words_of_each_error(error: PlanError, words: str) -> None:
    assert said(error) == words


@pytest.mark.parametrize(
    ("mark_owner", "error"),
    [(None, PlanError(Unplanned.UNMANAGED)), ("them", PlanError(Unplanned.OTHER_OWNER, owner="them"))],
)
def test_the_plan_says_the_record_it_made(mark_owner: str | None, error: PlanError) -> None:
    text = "<domain type='kvm'><name>web</name><memory unit='MiB'>128</memory></domain>"
    d = rendered("web", text)
    live = live_of(d)
    assert live.mark is not None
    mark = None if mark_owner is None else dataclasses.replace(live.mark, owner=mark_owner)
    plan = build_plan(REV, [d], [dataclasses.replace(live, mark=mark)], PlanPolicy(owner="me"))
    (problem,) = plan.errors
    assert (problem.vm, problem.message) == (d.key, said(error))


def test_adoption_refused_is_a_record() -> None:
    text = "<domain type='kvm'><name>web</name><memory unit='MiB'>128</memory></domain>"
    mark = live_of(rendered("web", text)).mark
    assert mark is not None
    held = dataclasses.replace(mark, owner="me", adopted_from="them")
    assert ownership.adoption_refused(held, "other") == PlanError(
        Unplanned.ADOPTION_REFUSED, owner="me", came="them"
    )
    assert ownership.adoption_refused(held, "me") is None
    assert ownership.adoption_refused(dataclasses.replace(held, released=True), "other") is None
