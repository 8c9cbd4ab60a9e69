"""images: change the name, tag or digest of container images, as kustomize 5 does.

Each entry (``name`` and any of ``newName``, ``newTag``, ``digest``, ``tagSuffix``)
rewrites every matching image reference, in order, in two passes as kustomize's
ImageTagTransformer makes them: first the ``image`` of every item of any
``containers`` or ``initContainers`` list anywhere in an object (not in a
CustomResourceDefinition), then the fields the merged config's ``images`` field specs
name (``configurations``: e.g. ``spec/template/spec/volumes[]/containerDisk/image``
of a VirtualMachine, the usual way to move a containerDisk to a new tag). ``name`` is
matched as kustomize matches it: a regular expression for the whole name, then an
optional ``:tag`` and ``@sha256:digest``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.manifests.patterns import Pattern, PatternError, compile_pattern
from reconciler.overlays.kustomization import STR, frozen_spec
from reconciler.overlays.resource import MISSING, Res, update_path

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.patching import Patching

FIELDS = ("images",)  # the kustomization fields this transformer reads
_ENTRY = ("name", "newName", "newTag", "digest", "tagSuffix")
SHAPES: Mapping[str, Any] = frozen_spec({"images": ["[]", set(_ENTRY)]})  # the keys each may hold
TYPES: Mapping[str, Any] = frozen_spec(
    {"images": ["[]", dict.fromkeys(_ENTRY, STR)]}
)  # strings, never numbers
_CONTAINER_LISTS = ("containers", "initContainers")


def split(image: str) -> tuple[str, str, str]:
    """``[host[:port]/]path[:tag][@digest]`` -> (name, tag, digest); the host's port is no tag."""
    slash = image.find("/")
    offset = slash if slash > 0 else 0
    search = image[offset:]
    at, colon = search.find("@"), search.find(":")
    if at < 0 and colon < 0:
        return image, "", ""
    if at >= 0 and (colon < 0 or at < colon):
        return image[: offset + at], "", image[offset + at + 1 :]
    if at >= 0:
        return image[: offset + colon], image[offset + colon + 1 : offset + at], image[offset + at + 1 :]
    return image[: offset + colon], image[offset + colon + 1 :], ""


class _Rewrite:
    """One ``images`` entry as a field function: the new reference, or MISSING."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.new_name = str(entry.get("newName") or "")
        self.new_tag = str(entry.get("newTag") or "")
        self.digest = str(entry.get("digest") or "")
        self.suffix = str(entry.get("tagSuffix") or "")
        self.match: Pattern | None
        try:  # as kustomize's Go regexp runs it (RE2: linear time whatever the name)
            name = str(entry.get("name") or "")
            self.match = compile_pattern(f"^{name}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$")
        except PatternError:
            self.match = None  # kustomize ignores a name that is no valid expression

    def __call__(self, old: Any) -> Any:
        if not isinstance(old, str) or self.match is None or not self.match.fullmatch(old):
            return MISSING
        name, tag, digest = split(old)
        name = self.new_name or name
        if self.new_tag:
            tag, digest = self.new_tag, self.digest
        elif self.digest:
            tag, digest = "", self.digest
        if self.suffix:
            tag, digest = tag + self.suffix, ""
        new = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
        return MISSING if new == old else new


def _containers(node: Any, fn: _Rewrite) -> Any:
    """Copy-on-write: every ``image`` of an item of a containers / initContainers list."""
    if isinstance(node, list):
        out = [_containers(item, fn) for item in node]
        return node if all(a is b for a, b in zip(out, node, strict=True)) else out
    if not isinstance(node, dict):
        return node
    changed: dict[str, Any] = {}
    for key, value in node.items():
        new = _containers(value, fn)
        if key in _CONTAINER_LISTS and isinstance(new, list):
            new = [
                update_path(item, ("image",), False, fn) if isinstance(item, dict) else item for item in new
            ]
            if all(a is b for a, b in zip(new, value, strict=True)):
                new = value
        if new is not value:
            changed[key] = new
    return {**node, **changed} if changed else node


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    specs = acc.config.images
    for i, entry in enumerate(kust.list_field("images")):
        if not isinstance(entry, dict):
            raise kust.error("images entries must be mappings", "images", i)
        rewrite = _Rewrite(entry)

        def fn(r: Res, rewrite: _Rewrite = rewrite) -> Res | None:
            cur = r.cur
            obj = r.obj if cur.kind == "CustomResourceDefinition" else _containers(r.obj, rewrite)
            for fs in specs:
                if fs.applies_to(cur):
                    obj = update_path(obj, fs.path, False, rewrite)
            return r if obj is r.obj else r.with_obj(obj)

        acc.res = b.each(b.fingerprint(kust, "images", i, specs), acc.res, fn)
