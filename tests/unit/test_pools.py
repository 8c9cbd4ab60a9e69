"""VirtualMachinePool: its replicas are VirtualMachines named as KubeVirt names them.

Covers: a pool of three expands to ``<pool>-0`` .. ``<pool>-2`` with the template's
labels, annotations and spec; scaling down plans the highest ordinals' deletion (and
only with pruning on, under the prune guard), scaling up plans creates; a selector
that does not select the template is refused as KubeVirt refuses it; a replica's name
taken by a VirtualMachine of the repository is an error; cluster-controller fields are
read with a warning that they have no effect; ``autohealing`` (KubeVirt's defaults, a
Kubernetes duration) reaches each replica's rendered domain, and a bad one is an error
at its line.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import render, source
from reconciler.catalog import build_catalog
from reconciler.desired import desired_state
from reconciler.errors import ManifestError
from reconciler.manifests import parse_documents
from reconciler.model import LiveDomain, PowerState
from reconciler.model import annotation_names as vm_annotations
from reconciler.model.changes import Action
from reconciler.model.rollout import Autohealing, PaceGroup, UpdateStrategy
from reconciler.plan.build import build_plan
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.escape import located
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

POOL = """apiVersion: pool.kubevirt.io/v1beta1
kind: VirtualMachinePool
metadata:
  name: web
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: web
  virtualMachineTemplate:
    metadata:
      labels:
        app: web
      annotations:
        team: edge
    spec:
      runStrategy: Halted
      template:
        spec:
          domain:
            devices: {{}}
            memory:
              guest: 256Mi
"""


def test_replicas_are_named_and_shaped_as_kubevirt_makes_them() -> None:
    cat = build_catalog(parse_documents(POOL.format(replicas=3).encode(), "pools/web.yaml"))
    assert [vm.name for vm in cat.vms] == ["web-0", "web-1", "web-2"]
    vm = cat.vms[1].obj
    # the pool's pacing rides on each replica (reconciler.kubevirt.io/pool: plan/pace.py)
    pace = json.loads(vm["metadata"]["annotations"].pop(vm_annotations.POOL))
    assert pace == {
        "pool": "web",
        "replicas": 3,
        "maxUnavailable": "100%",
        "updateStrategy": "proactive",
        "order": pace["order"],
    }
    assert (
        sorted(
            json.loads(v.obj["metadata"]["annotations"][vm_annotations.POOL])["order"] for v in cat.vms[::2]
        )
        != []
    )
    assert vm["metadata"] == {"labels": {"app": "web"}, "annotations": {"team": "edge"}, "name": "web-1"}
    assert vm["spec"]["runStrategy"] == "Halted"
    assert located(cat.vms[0]).startswith("pools/web.yaml:1")


def test_scaling_plans_creates_and_prunes(git_repo: GitRepo) -> None:
    git_repo.write("pools/web.yaml", POOL.format(replicas=3))
    git_repo.commit()
    host, caps = HostConfig(), render.HostCaps.default()
    three = desired_state(source.read_snapshot(git_repo.path), "", host, caps)
    assert [d.name for d in three.rendered] == ["web-0", "web-1", "web-2"]
    git_repo.write("pools/web.yaml", POOL.format(replicas=1))
    git_repo.commit()
    one = desired_state(source.read_snapshot(git_repo.path), "", host, caps)
    from reconciler import ownership

    live = [
        LiveDomain(
            name=d.name,
            uuid=d.uuid,
            state=PowerState.SHUTOFF,
            persistent_xml=d.xml,
            mark=ownership.mark_for(d, "a" * 40),
        )
        for d in three.rendered
    ]
    plan = build_plan("b" * 40, one.rendered, live, PlanPolicy(prune=True, max_prune_percent=100))
    assert {c.name: c.action for c in plan.changes} == {
        "web-0": Action.UNCHANGED,
        "web-1": Action.DELETE,
        "web-2": Action.DELETE,
    }
    guarded = build_plan("b" * 40, one.rendered, live, PlanPolicy(prune=True, max_prune_percent=30))
    assert guarded.prune_refused


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("app: web\n  virtualMachineTemplate", "app: db\n  virtualMachineTemplate"),
            "spec.selector.matchLabels must match",
        ),
        (("replicas: 2", "replicas: -1"), "spec.replicas must be a count"),
    ],
)
def test_a_pool_kubevirt_would_refuse_is_an_error(edit: tuple[str, str], message: str) -> None:
    text = POOL.format(replicas=2).replace(*edit)
    with pytest.raises(ManifestError, match=message):
        build_catalog(parse_documents(text.encode(), "pools/web.yaml"), lambda _p: text.encode())


def test_a_replica_name_taken_by_a_vm_is_an_error() -> None:
    vm = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: web-1\nspec:\n  template:\n    spec:\n      domain:\n        devices: {}\n---\n"
    text = vm + POOL.format(replicas=2)
    with pytest.raises(ManifestError, match="replica web-1 is also defined at"):
        build_catalog(parse_documents(text.encode(), "pools/web.yaml"))


def test_controller_fields_have_no_effect_and_say_so() -> None:
    text = POOL.format(replicas=1).replace(
        "  replicas: 1\n", "  replicas: 1\n  paused: true\n  maxUnavailable: 1\n"
    )
    cat = build_catalog(parse_documents(text.encode(), "pools/web.yaml"))
    assert tuple(map(words, cat.warnings)) == (
        "pools/web.yaml:1: VirtualMachinePool web: paused has no effect on a libvirt host",
    )


@pytest.mark.parametrize(
    ("sort", "orders"),
    [
        ("AscendingOrder", [0, 1, 2]),
        ("DescendingOrder", [2, 1, 0]),
        ("Oldest", [0, 1, 2]),
        ("Newest", [2, 1, 0]),
    ],
)
def test_the_pools_pacing_rides_on_each_replica(sort: str, orders: list[int]) -> None:
    spec = (
        "  replicas: 3\n  maxUnavailable: 34%\n  updateStrategy:\n    proactive:\n"
        f"      selectionPolicy:\n        sortPolicy: {sort}\n"
    )
    text = POOL.format(replicas=3).replace("  replicas: 3\n", spec)
    cat = build_catalog(parse_documents(text.encode(), "pools/web.yaml"))
    paces = [json.loads(v.obj["metadata"]["annotations"][vm_annotations.POOL]) for v in cat.vms]
    assert [p["order"] for p in paces] == orders
    assert {p["maxUnavailable"] for p in paces} == {"34%"}
    assert not cat.warnings


def test_a_bad_max_unavailable_is_an_error_at_its_line() -> None:
    text = POOL.format(replicas=2).replace("  replicas: 2\n", "  replicas: 2\n  maxUnavailable: lots\n")
    with pytest.raises(ManifestError, match=r"spec\.maxUnavailable must be a count or a percentage"):
        build_catalog(parse_documents(text.encode(), "pools/web.yaml"), lambda _p: text.encode())


def test_the_max_unavailable_annotation_and_the_pool_reach_the_rendered_domain(git_repo: GitRepo) -> None:
    vm = (
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: db\n  annotations:\n"
        "    reconciler.kubevirt.io/max-unavailable: '{limit}'\nspec:\n  template:\n    spec:\n"
        "      domain:\n        devices: {{}}\n        memory: {{guest: 64Mi}}\n"
    )
    git_repo.write("vms/db.yaml", vm.format(limit="1"))
    git_repo.write("pools/web.yaml", POOL.format(replicas=2))
    git_repo.commit()
    host, caps = HostConfig(), render.HostCaps.default()
    built = desired_state(source.read_snapshot(git_repo.path), "", host, caps)
    paces = {d.name: d.pace for d in built.rendered}
    assert paces["db"] == PaceGroup(max_unavailable="1")
    web = paces["web-0"]
    assert web is not None
    assert (web.group, web.max_unavailable, web.size, web.strategy) == (
        "pool/web",
        "100%",
        2,
        UpdateStrategy.PROACTIVE,
    )
    git_repo.write("vms/db.yaml", vm.format(limit="lots"))
    git_repo.commit()
    bad = desired_state(source.read_snapshot(git_repo.path), "", host, caps)
    (error,) = bad.errors
    assert error.path == "vms/db.yaml"
    assert "'lots' is not a count or a percentage" in words(error)


@pytest.mark.parametrize(
    ("autohealing", "expected"),
    [
        ("{}", Autohealing(3, 300.0)),  # set at all: on, KubeVirt's defaults
        ("{startUpFailureThreshold: 5, minFailingToStartDuration: 1h30m}", Autohealing(5, 5400.0)),
        ("{minFailingToStartDuration: 5m0s}", Autohealing(3, 300.0)),
    ],
)
def test_autohealing_reaches_each_replica_without_a_warning(
    git_repo: GitRepo, autohealing: str, expected: Autohealing
) -> None:
    text = POOL.format(replicas=2).replace(
        "  replicas: 2\n", f"  replicas: 2\n  autohealing: {autohealing}\n"
    )
    assert not build_catalog(parse_documents(text.encode(), "pools/web.yaml")).warnings
    git_repo.write("pools/web.yaml", text)
    git_repo.commit()
    built = desired_state(source.read_snapshot(git_repo.path), "", HostConfig(), render.HostCaps.default())
    assert [d.pace.autohealing if d.pace else None for d in built.rendered] == [expected, expected]


def test_a_pool_without_autohealing_never_reprovisions(git_repo: GitRepo) -> None:
    git_repo.write("pools/web.yaml", POOL.format(replicas=1))
    git_repo.commit()
    built = desired_state(source.read_snapshot(git_repo.path), "", HostConfig(), render.HostCaps.default())
    assert [d.pace.autohealing if d.pace else "none" for d in built.rendered] == [None]


@pytest.mark.parametrize(
    ("autohealing", "message"),
    [
        ("{startUpFailureThreshold: 0}", r"startUpFailureThreshold must be a count of at least 1"),
        ("{minFailingToStartDuration: soon}", r"minFailingToStartDuration 'soon' is not a duration"),
        ("true", r"spec\.autohealing: expected a mapping"),
    ],
)
def test_a_bad_autohealing_is_an_error_at_its_line(autohealing: str, message: str) -> None:
    text = POOL.format(replicas=2).replace(
        "  replicas: 2\n", f"  replicas: 2\n  autohealing: {autohealing}\n"
    )
    with pytest.raises(ManifestError, match=message) as err:
        build_catalog(parse_documents(text.encode(), "pools/web.yaml"), lambda _p: text.encode())
    assert "pools/web.yaml:" in str(err.value)
