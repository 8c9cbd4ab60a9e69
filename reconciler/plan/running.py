"""What a running domain is not asked again: unplugs already requested, live operations
libvirt refused.

Input: a running diff (``compare.changes.RunningDiff``) and what the domain's ownership
mark records (``unplugs`` requested, ``refused`` operations by ``LiveOp.key``). Output:
the running diff with those operations taken out and their changes staged as
restart-class (RestartRequired until the next cold boot), with a note for each refusal.
Pure; never retries what libvirt refused, never decides anything else.
"""

from __future__ import annotations

from reconciler.compare.changes import RunningDiff
from reconciler.model.changes import ChangeClass, FieldChange, LiveOpKind
from reconciler.model.reasons import Note, Noted


def pending_unplugs(rd: RunningDiff, unplugs: tuple[str, ...]) -> RunningDiff:
    """An unplug already requested is not requested again.

    If the guest never releases the device, it leaves at the next cold boot: until then
    it counts as a staged restart-class change (RestartRequired).
    """
    pending = {f"devices/{u}" for u in unplugs}
    waiting = tuple(
        FieldChange(f.path, f.old, f.new, ChangeClass.RESTART)
        for f in rd.live
        if f.path in pending and f.new is None
    )
    if not waiting:
        return rd
    held = {f.path for f in waiting}
    return RunningDiff(
        tuple(f for f in rd.live if f.path not in held),
        rd.restart + waiting,
        tuple(op for op in rd.ops if not (op.kind == LiveOpKind.DETACH and op.target in unplugs)),
        rd.notes,
    )


def refused_ops(rd: RunningDiff, refused: tuple[str, ...]) -> RunningDiff:
    """A live operation libvirt refused once (recorded in the mark) is not tried again:
    its change waits for the next cold boot (RestartRequired), never a retry loop."""
    gone = [op for op in rd.ops if op.key in refused]
    if not gone:
        return rd
    paths: set[str] = set()
    extra: list[FieldChange] = []
    for op in gone:
        if op.kind == LiveOpKind.SET_VCPUS:
            paths.add("vcpu@current")
        elif op.kind == LiveOpKind.SET_MEMORY:  # the balloon target: no field of the running diff
            extra.append(FieldChange("currentMemory", None, op.value, ChangeClass.RESTART))
        elif op.target:
            paths.add(f"devices/{op.target}")

    def hit(path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in paths)

    moved = [FieldChange(f.path, f.old, f.new, ChangeClass.RESTART) for f in rd.live if hit(f.path)]
    notes = tuple(Note(Noted.OP_REFUSED, op.target, op.value, str(op.kind)) for op in gone)
    return RunningDiff(
        tuple(f for f in rd.live if not hit(f.path)),
        (*rd.restart, *moved, *extra),
        tuple(op for op in rd.ops if op not in gone),
        rd.notes + notes,
    )
