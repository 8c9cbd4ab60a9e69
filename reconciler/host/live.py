"""The live operations of a change on a running domain, and what the mark keeps of them.

Input: a planned ``Change`` whose domain runs (its definition already defined), the
``Hypervisor`` and the domain's ownership mark. Output: ``Live``: the mark with the
hot-unplugs asked and the operations libvirt refused (written to the domain when it
changed), and the notes of the apply's result. Each operation takes its device XML
from the new definition (``host.definition``). A refused operation is recorded in the
mark, so the next plan stages it (RestartRequired until the next cold boot) instead of
trying again; without a mark it fails the change and is tried again next time. A lost
host is raised, never taken for a refusal.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from reconciler import ownership
from reconciler.errors import HypervisorError, HypervisorUnavailable
from reconciler.host.definition import Devices
from reconciler.model import OwnershipMark, VMKey
from reconciler.model.changes import LiveOpKind
from reconciler.records import dataclass
from reconciler.wording import problems

if TYPE_CHECKING:
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.model.changes import Change, LiveOp

log = structlog.get_logger("reconciler.host.apply")


@dataclass(frozen=True, slots=True)
class Live:
    """What a change's live operations left: the mark (as written to the domain), whether
    each was made or recorded as refused (``ok``), the notes of the result and those of
    the failures with the VM's own name left out (``causes``)."""

    mark: OwnershipMark | None
    ok: bool = True
    notes: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()


def live_op(op: LiveOp, name: str, hv: Hypervisor, devices: Devices) -> None:
    """Make one live operation on the running domain ``name``."""
    if op.kind == LiveOpKind.SET_MEMORY:
        hv.set_memory(name, int(op.value))
    elif op.kind == LiveOpKind.SET_VCPUS:
        hv.set_vcpus(name, int(op.value))
    elif op.kind == LiveOpKind.SET_METADATA:
        if op.target in ("title", "description"):
            hv.set_text_metadata(name, op.target, op.value)
        else:
            element, uri = devices.metadata(op.target)
            hv.set_element_metadata(name, element, "m", uri, config=False)
    elif op.kind == LiveOpKind.DETACH:
        dev = devices.running(op.target)
        if dev is not None:
            log.info(
                "hot-unplug asked: waits for the guest",
                subject=VMKey.from_domain(name).subject,
                device=op.target,
            )
            hv.detach_device(name, dev)
    else:
        dev = devices.persistent(op.target)
        if dev is None:
            raise HypervisorError(
                f"{op.target} is not in the new definition", subject=VMKey.from_domain(name).subject
            )
        if op.kind == LiveOpKind.ATTACH:
            hv.attach_device(name, dev)
        else:
            hv.update_device(name, dev)


def apply_live_ops(c: Change, hv: Hypervisor, mark: OwnershipMark | None) -> Live:
    """Make ``c``'s live operations in order; the mark written again when the unplugs
    asked or the operations refused changed."""
    unplugs = set(mark.unplugs) if mark is not None else set()
    refused = set(mark.refused) if mark is not None else set()
    notes: list[str] = []
    causes: list[str] = []
    ok = True
    devices = Devices(c, hv)
    for op in c.live_ops:
        try:
            live_op(op, c.name, hv, devices)
        except HypervisorUnavailable:
            raise  # the host is gone, not the operation refused
        except HypervisorError as err:
            if mark is None:  # nowhere to remember the refusal: tried again next time
                ok = False
                notes.append(f"live {op} failed ({err}): takes effect at the next cold boot")
                causes.append(
                    f"live {op} failed ({problems.anonymous(err.problem_of(c.key), c.key)}): "
                    "takes effect at the next cold boot"
                )
                continue
            refused.add(op.key)  # refused once: the next plan stages it instead of trying again
            notes.append(f"live {op} refused by libvirt ({err}): RestartRequired until the next cold boot")
            log.warning(
                "live change refused: staged for the next cold boot",
                subject=c.subject,
                op=str(op),
                error=str(err),
            )
            continue
        if op.kind == LiveOpKind.DETACH:
            unplugs.add(op.target)  # the guest may take its time: ask once
        elif op.kind == LiveOpKind.ATTACH:
            unplugs.discard(op.target)
    kept = (tuple(sorted(unplugs)), tuple(sorted(refused)))
    if mark is not None and kept != (mark.unplugs, mark.refused):
        mark = replace(mark, unplugs=kept[0], refused=kept[1])
        hv.set_element_metadata(c.name, ownership.mark_xml(mark), ownership.PREFIX, ownership.NS)
    return Live(mark, ok, tuple(notes), tuple(causes))
