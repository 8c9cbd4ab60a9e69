"""patchesJson6902: JSON 6902 operations on the objects a target selects."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import jsonpatch

from reconciler.manifests import ScalarText, parse_yaml11
from reconciler.overlays.kustomization import SELECTOR, STR, frozen_spec
from reconciler.overlays.linked import detach
from reconciler.overlays.resource import Res, pointer_path

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.patching import Patching
    from reconciler.overlays.selector import Selector

FIELDS = ("patchesJson6902",)  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec(
    {"patchesJson6902": ["[]", {"path": None, "patch": None, "target": SELECTOR}]}
)  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec(
    {"patchesJson6902": ["[]", {"path": STR, "patch": STR, "target": dict.fromkeys(SELECTOR, STR)}]}
)  # where a YAML 1.1 boolean or number is an error


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    for i, entry in enumerate(kust.list_field("patchesJson6902")):
        where: tuple[str | int, ...] = ("patchesJson6902", i)
        if not isinstance(entry, dict) or not isinstance(entry.get("target"), dict):
            raise kust.error("patchesJson6902 entries need a target", *where)
        if entry.get("path"):
            path, data = b.read_kust_file(kust, str(entry["path"]), (*where, "path"))
            docs = parse_yaml11(data, path)
            origin = (path, 1, data)
        elif entry.get("patch"):
            docs = b.load_patch_docs(kust, str(entry["patch"]), (*where, "patch"), yaml11=True)
            origin = (kust.path, kust.pos(*where, "patch")[0] + 1, str(entry["patch"]).encode())
        else:
            raise kust.error("patchesJson6902 entries need path or patch", *where)
        if len(docs) != 1 or not isinstance(docs[0], list):
            raise kust.error("a JSON 6902 patch must be a list of operations", *where)
        selector = b.selector(kust, entry["target"], (*where, "target"))
        json6902(b, kust, acc, docs[0], selector, where, ("patchesJson6902", i), origin)


def json6902(
    b: Patching,
    kust: Kust,
    acc: Acc,
    ops: list[Any],
    selector: Selector,
    where: tuple[str | int, ...],
    key_parts: tuple[Any, ...],
    origin: tuple[str, int, bytes] = ("", 0, b""),
) -> None:
    """Apply ``ops`` to the objects ``selector`` matches; the fields they change are
    recorded as set where ``origin`` (file, first line of the patch text, the text) writes
    each operation."""
    try:
        steps = [jsonpatch.JsonPatch([op]) for op in ops]
    except (jsonpatch.JsonPatchException, TypeError, KeyError, AttributeError) as err:
        raise kust.error(f"invalid JSON 6902 patch: {err}", *where) from err
    hits = b.select(selector, acc.res)
    if not hits:
        b.no_target(kust, where)

    key = b.fingerprint(kust, "json6902", *key_parts, selector.key)
    file, first, text = origin
    named = [
        (i, p) for i, op in enumerate(ops) if isinstance(op, dict) and (p := pointer_path(op.get("path")))
    ]
    sets = b.lines_in(text, first, [p for _, p in named], [(i,) for i, _ in named])
    fn = partial(_patched, kust=kust, ops=ops, steps=steps, where=where)
    b.apply_to(acc, hits, key, b.recorded(fn, file, first, sets) if file else fn)


def _patched(
    r: Res, kust: Kust, ops: list[Any], steps: list[jsonpatch.JsonPatch], where: tuple[str | int, ...]
) -> Res | None:
    """``r`` with each of ``ops`` applied in turn, as kustomize applies them (to a JSON copy)."""
    # kustomize patches a JSON copy: node links are cut. ``detach`` copies every
    # mapping and list as it cuts them (one pass over the object per patch, not two).
    doc = detach(r.obj)
    meta: Any = doc.get("metadata")
    # kustomize's resources always carry (internal) annotations while patches run,
    # so a patch may add below /metadata/annotations even when the file had none.
    added_annotations = isinstance(meta, dict) and "annotations" not in meta
    if added_annotations:
        meta["annotations"] = {}
    elif isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        # kustomize patches a JSON copy: annotation values are typed again (0x10 -> 16)
        meta["annotations"] = {
            k: v.typed if isinstance(v, ScalarText) else v for k, v in meta["annotations"].items()
        }
    for n, (op, step) in enumerate(zip(ops, steps, strict=True)):
        try:
            if isinstance(op, dict) and op.get("op") == "replace":
                step = _replace_as_add(doc, op, step)
            doc = step.apply(doc, in_place=True)
        except (
            jsonpatch.JsonPatchException,
            jsonpatch.JsonPointerException,
            TypeError,
            KeyError,
            IndexError,
        ) as err:
            why = _why(doc, op, err)
            raise kust.error(
                f"JSON 6902 patch failed on {r.cur} ({r.path}:{r.line}): operation {n + 1} {why}", *where
            ) from err
    if not isinstance(doc, dict):
        raise kust.error(f"JSON 6902 patch made {r.cur} something other than an object", *where)
    meta = doc.get("metadata")
    if added_annotations and isinstance(meta, dict) and meta.get("annotations") == {}:
        del meta["annotations"]
    return r.with_obj(doc)  # what the operations added holds no link: the patch's own values


def _why(doc: Any, op: Any, err: Exception) -> str:
    """Why one operation failed, in the patch's own terms (its op and paths): never a
    value of the document (a Secret's, or one copied from it), as the library words it."""
    if not isinstance(op, dict):
        return "is not an operation"
    name, path = str(op.get("op", "")), str(op.get("path", ""))
    here = f"({name} {path})"
    if isinstance(err, jsonpatch.JsonPatchTestFailed):
        return f"{here}: the value at {path} is not the one tested (values are not shown)"
    for field in ("from", "path"):
        where = str(op.get(field, "")) if field in op else ""
        if field == "from" and not where:
            continue
        missing = _missing(doc, where, name in ("add", "replace") and field == "path")
        if missing:
            return f"{here}: {field} {where}: {missing}"
    return f"{here}: the operation does not apply to what is at {path}"


def _missing(doc: Any, pointer: str, last_may_be_new: bool) -> str:
    """What of ``pointer`` is not in ``doc`` (in the pointer's own terms), or ""."""
    try:
        parts = jsonpatch.JsonPointer(pointer).parts
    except jsonpatch.JsonPointerException:
        return "not a JSON pointer"
    node = doc
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        at = "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts[:i]) or "/"
        if isinstance(node, dict):
            if part not in node:
                return "" if last and last_may_be_new else f"no member {part!r} at {at}"
            node = node[part]
        elif isinstance(node, list):
            if part == "-" and last and last_may_be_new:
                return ""
            if (
                not str(part).isdigit()
                or int(part) > len(node)
                or (int(part) == len(node) and not last_may_be_new)
            ):
                return f"no item {part!r} in the list at {at}"
            node = node[int(part)] if int(part) < len(node) else None
        else:
            return f"{at} is a {'string' if isinstance(node, str) else 'scalar'}, not a map or a list"
    return ""


def _replace_as_add(doc: Any, op: dict[str, Any], step: jsonpatch.JsonPatch) -> jsonpatch.JsonPatch:
    """kustomize's JSON patch library lets ``replace`` create a missing key of an existing map."""
    try:
        parent, last = jsonpatch.JsonPointer(str(op.get("path", ""))).to_last(doc)
    except (jsonpatch.JsonPointerException, TypeError, KeyError, IndexError):
        return step
    if isinstance(parent, dict) and last not in parent:
        return jsonpatch.JsonPatch([{**op, "op": "add"}])
    return step
