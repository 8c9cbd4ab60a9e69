"""Import: existing libvirt domains, or a KubeVirt export, turned into a repository.

Input: the live domains of a host (``LiveDomain``, read by ``host/``), which of them
libvirt autostarts, and the host's facts; or the YAML of ``kubectl get ... -o yaml``
(``importer.kubevirt``). Output: an ``ImportResult``: the repository's files (path ->
text: one VirtualMachine per domain, a ``kustomization.yaml``, the host config) and
one ``Outcome`` per domain (imported, or left out with each reason). Pure: the CLI
reads the host and writes the files; nothing here touches libvirt or the disk.

Every domain imported is proven (``importer.verify``): its VM, rendered with the host
config written beside it, plans to ``adopt`` with no change against the very domain it
came from, and a redefinition would drop nothing of it. A domain that fails any of this
is left out with the reasons; nothing is dropped in silence. Asked to keep what the
YAML cannot say (``keep``), the import grows each VM's pass-through from its proof's
gaps (``importer.keep``) and proves it again, a bounded number of rounds.
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.config.host import host_config_from_obj
from reconciler.errors import ManifestError
from reconciler.importer.domain import prefixes_in, read_domain, with_fragment
from reconciler.importer.hostconfig import (
    chosen_settings,
    host_config_obj,
    host_defaults,
    pod_conflicts,
    setting_conflicts,
)
from reconciler.importer.keep import Keeper, kept_summary
from reconciler.importer.verify import Gap, Proof, verify, vm_path
from reconciler.manifests.printer import dump_documents
from reconciler.records import dataclass
from reconciler.render.passthrough import fragment_text

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from collections.abc import Set as AbstractSet

    from reconciler.hostfacts import HostFacts
    from reconciler.importer.reading import Reading
    from reconciler.model import LiveDomain
    from reconciler.settings.host import HostConfig

IMPORTED = "imported"
LEFT_OUT = "left out"
HOST_CONFIG_DIR = "hosts"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one domain (or exported object)."""

    source: str  # the domain name, or the object's kind/namespace/name
    status: str  # IMPORTED | LEFT_OUT
    path: str = ""  # the file written for it
    reasons: tuple[str, ...] = ()  # why it was left out
    notes: tuple[str, ...] = ()  # adjustments (a mapped name, an unpinned revision, ...)

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": self.status,
            "path": self.path,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class ImportResult:
    files: Mapping[str, str]  # repository path -> text
    outcomes: tuple[Outcome, ...]
    host_config_path: str = ""

    @property
    def imported(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status == IMPORTED)

    @property
    def left_out(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status == LEFT_OUT)

    def as_json(self) -> dict[str, Any]:
        """``import -o json`` (``reconciler/data/schemas/import.schema.json``)."""
        return {
            "schemaVersion": SCHEMA_VERSION,
            "imported": len(self.imported),
            "adjusted": sum(1 for o in self.imported if o.notes),
            "leftOut": len(self.left_out),
            "hostConfig": self.host_config_path,
            "objects": [o.as_json() for o in self.outcomes],
        }


SCHEMA_VERSION = 1  # of ``ImportResult.as_json``


def kustomization(paths: Sequence[str]) -> str:
    obj = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": list(paths)}
    return dump_documents([obj])


def import_domains(
    live: Sequence[LiveDomain],
    selected: Sequence[str],
    autostarted: AbstractSet[str],
    facts_of: Callable[[Sequence[str], Sequence[str]], HostFacts],
    host_name: str,
    progress: Callable[[str], None] | None = None,
    keep: bool = True,
) -> ImportResult:
    """Read back the domains named in ``selected`` (of ``live``), prove each, and lay out
    the repository of those that pass. ``facts_of(image paths, allowed directories)``
    reads the host's facts (the images of kernel boots among them). ``keep`` (the
    default; ``import --no-passthrough`` turns it off): what the YAML cannot express is
    kept in each VM's pass-through where the allowlist lets it (``importer.keep``),
    instead of being a reason to leave the domain out."""
    by_name = {d.name: d for d in live}
    readings, reasons = _read_selected(by_name, selected, autostarted, keep, progress)
    candidates = [r for n, r in readings.items() if n not in reasons]
    facts = facts_of(
        sorted({d for r in candidates for _, d in r.ask.images}),
        sorted({d for r in candidates for d in r.ask.directories}),
    )
    defaults = host_defaults(facts.caps)
    obj: dict[str, Any] = host_config_obj(candidates, host_name, defaults)
    rounds: dict[str, int] = {}
    for _ in range(len(candidates) + 1 + KEEP_ROUNDS):
        candidates, obj = _without_conflicts(candidates, reasons, host_name, defaults)
        if not candidates:
            break
        try:
            host = host_config_from_obj(obj, f"{HOST_CONFIG_DIR}/{host_name}.yaml")
        except ManifestError as err:
            for r in candidates:
                reasons[r.domain] = (f"the host config it needs is invalid: {err}",)
            candidates = []
            break
        if progress is not None:
            again = " again, with their pass-throughs grown" if keep and rounds else ""
            progress(f"planning {len(candidates)} domain(s) against the live definitions{again}")
        proofs = verify(candidates, host, facts, live)
        failed, grown = _grow_or_fail(candidates, proofs, readings, rounds, by_name, host, keep)
        if not failed and not grown:
            break
        reasons.update(failed)
        candidates = [readings[r.domain] for r in candidates if r.domain not in failed]
    for r in candidates:
        if r.fragment is not None:
            readings[r.domain] = replace(r, notes=(*r.notes, "passthrough: " + kept_summary(r.fragment)))
    candidates = [readings[r.domain] for r in candidates]
    return _layout(selected, readings, candidates, reasons, obj, host_name)


def _read_selected(
    by_name: Mapping[str, LiveDomain],
    selected: Sequence[str],
    autostarted: AbstractSet[str],
    keep: bool,
    progress: Callable[[str], None] | None,
) -> tuple[dict[str, Reading], dict[str, tuple[str, ...]]]:
    """The reading of each selected domain (a transient one has none), and the reasons
    of each left out already, by domain name."""
    reasons: dict[str, tuple[str, ...]] = {}
    readings: dict[str, Reading] = {}
    for i, name in enumerate(selected, 1):
        d = by_name[name]
        if progress is not None:
            progress(f"[{i}/{len(selected)}] reading {name}")
        if not d.persistent:
            reasons[name] = ("a transient domain (no persistent definition to adopt: virsh define it first)",)
            continue
        reading = read_domain(d.persistent_xml, d.state, name in autostarted, keep)
        readings[name] = reading
        if reading.reasons:
            reasons[name] = reading.reasons
    return readings, reasons


def _without_conflicts(
    candidates: Sequence[Reading],
    reasons: dict[str, tuple[str, ...]],
    host_name: str,
    defaults: dict[str, str],
) -> tuple[list[Reading], dict[str, Any]]:
    """The candidates whose host settings and pod network agree with the others', and
    the host config of those; each one left out gets its reasons in ``reasons``."""
    chosen = chosen_settings(candidates)
    for r in candidates:
        why = setting_conflicts(r, chosen)
        if why:
            reasons[r.domain] = why
    kept = [r for r in candidates if r.domain not in reasons]
    obj = host_config_obj(kept, host_name, defaults)
    for r in kept:
        why = pod_conflicts(r, obj)
        if why:
            reasons[r.domain] = why
    kept = [r for r in kept if r.domain not in reasons]
    return kept, host_config_obj(kept, host_name, defaults)


def _grow_or_fail(
    candidates: Sequence[Reading],
    proofs: Mapping[str, Proof],
    readings: dict[str, Reading],
    rounds: dict[str, int],
    by_name: Mapping[str, LiveDomain],
    host: HostConfig,
    keep: bool,
) -> tuple[dict[str, tuple[str, ...]], bool]:
    """One round's proofs judged: the reasons of each candidate that failed its proof,
    and whether a pass-through grew instead (its new reading in ``readings``, its round
    counted in ``rounds``), to be proven again."""
    failed: dict[str, tuple[str, ...]] = {}
    grown = False
    for r in candidates:
        proof = proofs[r.domain]
        if not proof.gaps:
            continue
        rounds[r.domain] = rounds.get(r.domain, 0) + 1
        if keep and rounds[r.domain] <= KEEP_ROUNDS:
            grew, left = _keep(r, proof, by_name[r.domain].persistent_xml, host)
            if grew is not None and not left:
                readings[r.domain] = grew
                grown = True
                continue
            failed[r.domain] = Proof(tuple(left)).reasons if left else proof.reasons
        else:
            failed[r.domain] = proof.reasons
    return failed, grown


# How often one domain's pass-through may grow from its proof (each round keeps what the
# last plan showed missing: a channel omitted, then the live one in its place).
KEEP_ROUNDS = 4


def _keep(
    reading: Reading, proof: Proof, live_xml: str, host: HostConfig
) -> tuple[Reading | None, list[Gap]]:
    """``reading`` with its pass-through grown to close the proof's gaps (None: nothing
    could be kept), and the gaps left open."""
    fragment = copy.deepcopy(reading.fragment) if reading.fragment is not None else ET.Element("domain")
    prefixes = reading.prefixes or prefixes_in(live_xml)
    before = fragment_text(fragment, prefixes)
    keeper = Keeper(fragment, live_xml, host)
    left = keeper.close(proof.gaps, proof.final_xml)
    if left or fragment_text(keeper.fragment, prefixes) == before:
        return None, left or list(proof.gaps)
    return with_fragment(reading, keeper.fragment, prefixes), []


def _layout(
    selected: Sequence[str],
    readings: Mapping[str, Reading],
    imported: Sequence[Reading],
    reasons: Mapping[str, tuple[str, ...]],
    host_obj: dict[str, Any],
    host_name: str,
) -> ImportResult:
    files: dict[str, str] = {}
    outcomes: list[Outcome] = []
    ok = {r.domain for r in imported}
    for name in selected:
        reading = readings.get(name)
        notes = reading.notes if reading is not None else ()
        if name in ok and reading is not None:
            path = vm_path(reading)
            files[path] = dump_documents([reading.vm])
            outcomes.append(Outcome(name, IMPORTED, path, (), notes))
        else:
            outcomes.append(Outcome(name, LEFT_OUT, "", reasons.get(name, ("not imported",)), notes))
    files["kustomization.yaml"] = kustomization(sorted(p for p in files if p.startswith("vms/")))
    host_path = f"{HOST_CONFIG_DIR}/{host_name}.yaml"
    files[host_path] = dump_documents([host_obj])
    return ImportResult(files, tuple(outcomes), host_path)


__all__ = ["IMPORTED", "LEFT_OUT", "ImportResult", "Outcome", "import_domains", "kustomization"]
