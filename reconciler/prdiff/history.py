"""The host a PR diff simulates: base's domains as a host holds them (``simulated_live``),
and the revisions it captured for the VMs a PR rolls forward.

Input: the VMs of head that newly carry ``reconciler.kubevirt.io/roll-forward: "true"``
(by key, with the instancetype / preference names they use at base), the first-parent
ancestors of base (newest first, as the caller's git lists them) and ``catalog_at``
(the caller's build of another commit). Output: pins (``{VMKey: {"instancetype" |
"preference": RevisionInfo}}``) with which base is simulated: a host that applied every
commit captured each object when the VM was first applied, at the oldest commit of the
unbroken run (going back from base) where the VM used the same object, and kept it
since. So the PR diff of a commit that only adds the annotation shows the fields the
daemon stages (``memory.guest: 4Gi → 6Gi``), not "nothing to apply". Bounded: at most
``MAX_ANCESTORS`` commits are read, each tree built once (``catalog_at``). Pure: never
imports git; a commit that cannot be built ends the walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.catalog import CLUSTER_KINDS
from reconciler.errors import ReconcilerError
from reconciler.expand.matcher import resolve_kind
from reconciler.expand.revision import revision_info
from reconciler.expand.tree import RuleError
from reconciler.model import LiveDomain, PowerState, RunStrategy, VMKey
from reconciler.model.annotation_names import ROLL_FORWARD
from reconciler.plan.build import START_ON_CREATE

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from reconciler.catalog import Catalog
    from reconciler.desired import Desired
    from reconciler.expand.pins import CatalogAt
    from reconciler.model import Manifest, RevisionInfo

MAX_ANCESTORS = 32
DEFAULT_NAMESPACE = "default"
ROLES = ("instancetype", "preference")


def simulated_live(base: Desired) -> tuple[LiveDomain, ...]:
    """Base's domains as a host that applied base would hold them (marks included).

    A VM is taken as running unless its run strategy is ``Halted``: the worst case for
    Manual and Once VMs, which is said in the consequence.
    """
    live: list[LiveDomain] = []
    for d in base.rendered:
        running = d.run_strategy != RunStrategy.HALTED
        # The reconciler started it when it created it (``with_start(mark, 0.0, 0)``).
        mark = ownership.mark_for(d, base.revision, started=d.run_strategy in START_ON_CREATE)
        live.append(
            LiveDomain(
                name=d.name,
                uuid=d.uuid,
                state=PowerState.RUNNING if running else PowerState.SHUTOFF,
                persistent_xml=d.xml,
                live_xml=d.xml if running else "",
                mark=mark,
            )
        )
    return tuple(live)


def uses(vm: Manifest, namespace: str) -> dict[str, tuple[str, str, str]]:
    """The objects the VM's spec names, by role: (kind, namespace, name)."""
    spec = vm.obj.get("spec")
    out: dict[str, tuple[str, str, str]] = {}
    if not isinstance(spec, dict):
        return out
    for role in ROLES:
        matcher = spec.get(role)
        if not isinstance(matcher, dict) or not matcher.get("name") or matcher.get("revisionName"):
            continue
        try:
            kind = resolve_kind(role, matcher)
        except RuleError:
            continue
        out[role] = (kind, "" if kind in CLUSTER_KINDS else namespace, str(matcher["name"]))
    return out


def rolled(
    base: Mapping[tuple[str, str, str], Manifest], head: Mapping[tuple[str, str, str], Manifest]
) -> dict[VMKey, dict[str, tuple[str, str, str]]]:
    """The VMs head newly rolls forward (``reconciler.kubevirt.io/roll-forward: "true"``,
    not at base), by key, with the objects they use at base (revisions' objects by
    (kind, namespace, name), as ``Desired.objects`` holds them)."""
    out: dict[VMKey, dict[str, tuple[str, str, str]]] = {}
    for (kind, ns, name), m in head.items():
        if kind != "VirtualMachine" or not _rolls_forward(m):
            continue
        before = base.get((kind, ns, name))
        if before is None or _rolls_forward(before):
            continue
        used = uses(before, ns or DEFAULT_NAMESPACE)
        if used:
            out[VMKey(ns or DEFAULT_NAMESPACE, name)] = used
    return out


def _rolls_forward(m: Manifest) -> bool:
    meta = m.obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return isinstance(annotations, dict) and annotations.get(ROLL_FORWARD) == "true"


def captured_pins(
    base: Catalog,
    base_commit: str,
    rolled: Mapping[VMKey, Mapping[str, tuple[str, str, str]]],
    ancestors: Callable[[], Sequence[str]],
    catalog_at: CatalogAt,
) -> dict[VMKey, dict[str, RevisionInfo]]:
    """Pins of the VMs in ``rolled`` (key -> the objects it uses at base) as a host that
    applied every commit since the VM's first one holds them (see the module doc)."""
    found: dict[VMKey, dict[str, RevisionInfo]] = {}
    open_keys = set(rolled)

    def take(cat: Catalog, commit: str) -> None:
        vms = dict(cat.keyed_vms())
        for key in list(open_keys):
            vm = vms.get(key)
            if vm is None or uses(vm, key.namespace) != rolled[key]:
                open_keys.discard(key)  # the run ends: the VM was (re)created after this commit
                continue
            for role, (kind, ns, name) in rolled[key].items():
                obj = cat.get(kind, ns, name)
                if obj is not None:
                    found.setdefault(key, {})[role] = revision_info(obj.obj, ns, commit)

    take(base, base_commit)
    for commit in ancestors()[:MAX_ANCESTORS] if open_keys else ():
        if not open_keys:
            break
        try:
            full, cat = catalog_at(commit)
        except ReconcilerError:
            break
        take(cat, full)
    return found
