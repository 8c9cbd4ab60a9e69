"""The generated objects of one kustomization level: its generators run, their output
added to the objects accumulated so far.

Input: the build's ``Loader`` (the kustomization's files read, SOPS files opened with
its keys), a ``Kust`` and its ``Acc``. Output: ``acc`` with each ConfigMap and Secret
of ``configMapGenerator`` and ``secretGenerator`` (made by ``generators``) added, or
merged with or replacing the object of its id (``behavior``), as kustomize 5 does; a
Secret generated from SOPS-encrypted files carries the digest of its committed
sources (``seal``), and reads as sealed without keys. An encrypted file read by a
ConfigMap is an error at the kustomization's line. Pure: every byte comes through the
loader; no message holds a value.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler.errors import OverlayError
from reconciler.manifests.sops.files import file_format
from reconciler.overlays.generators import generate, merge_options
from reconciler.overlays.resource import Res, id_key

if TYPE_CHECKING:
    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.loader import Loader


def run_generators(loader: Loader, kust: Kust, acc: Acc) -> None:
    """Run ``kust``'s configMapGenerator and secretGenerator entries into ``acc``."""
    global_options = kust.map_field("generatorOptions")
    for field_name, kind in (("configMapGenerator", "ConfigMap"), ("secretGenerator", "Secret")):
        for i, args in enumerate(kust.list_field(field_name)):
            if not isinstance(args, dict):
                raise kust.error(f"{field_name} entries must be mappings", field_name, i)
            options = merge_options(args.get("options"), global_options)
            committed: list[bytes] = []  # the sources as committed: a name hash's basis
            encrypted: list[str] = []

            def reader(
                rel: str,
                i: int = i,
                field_name: str = field_name,
                committed: list[bytes] = committed,
                encrypted: list[str] = encrypted,
            ) -> bytes:
                path, data = loader.read_kust_file(kust, rel, (field_name, i))
                committed.append(data)
                if file_format(data, rel) is None:
                    return data
                if field_name != "secretGenerator":
                    raise kust.error(
                        f"{rel} is encrypted with SOPS: only a secretGenerator decrypts a file "
                        "(a ConfigMap's values are shown in plans and domain XML)",
                        field_name,
                        i,
                    )
                encrypted.append(path)
                opened = loader.open_file(data, path, posixpath.basename(rel))
                return data if opened is None else opened

            try:
                obj, needs_hash = generate(kind, args, options, reader)
            except OverlayError as err:
                if err.path:
                    raise
                raise kust.error(err.message, field_name, i) from err
            except UnicodeDecodeError as err:
                raise kust.error("env file is not valid UTF-8", field_name, i) from err
            line = kust.pos(field_name, i)[0]
            behavior = str(args.get("behavior") or "create")
            if behavior not in ("create", "merge", "replace"):
                raise kust.error(f"unknown generator behavior {behavior!r}", field_name, i, "behavior")
            seal = ""
            if encrypted:
                literals = [str(lit).encode() for lit in args.get("literals") or ()]
                seal = hashlib.sha256(b"\0".join([*committed, *literals])).hexdigest()
            new = Res(
                obj,
                kust.path,
                line,
                needs_hash=needs_hash,
                behavior=behavior,
                origin=(kust.path, f"{kind}Generator", kust.plugin),
                sealed=bool(encrypted) and loader.keys is not None and loader.keys.sealed,
                seal=seal,
            )
            absorb_generated(kust, field_name, i, acc, new)


def absorb_generated(kust: Kust, field_name: str, i: int, acc: Acc, new: Res) -> None:
    """``new`` added to ``acc``, or merged with or replacing the object of its id
    (its ``behavior``), as kustomize's generators do."""
    key = id_key(new.cur)
    matches = [idx for idx, r in enumerate(acc.res) if r.known_as(key)]
    if not matches:
        if new.behavior in ("merge", "replace"):
            raise kust.error(f"id {new.cur} does not exist; cannot merge or replace", field_name, i)
        acc.res.append(new)
        return
    if len(matches) > 1:
        raise kust.error(f"found multiple objects that could accept merge of {new.cur}", field_name, i)
    idx = matches[0]
    old = acc.res[idx]
    if new.behavior == "create":
        raise kust.error(
            f"may not add resource with an already registered id: {new.cur}; behavior must be merge or replace",
            field_name,
            i,
        )
    old_meta = old.obj.get("metadata") or {}
    new_meta = dict(new.obj.get("metadata") or {})
    for key_name in ("labels", "annotations"):
        merged = {**(old_meta.get(key_name) or {}), **(new_meta.get(key_name) or {})}
        if merged:
            new_meta[key_name] = merged
    new_meta["name"] = old_meta.get("name")
    if old_meta.get("namespace"):
        new_meta["namespace"] = old_meta["namespace"]
    else:
        new_meta.pop("namespace", None)
    obj = {**new.obj, "metadata": new_meta}
    if new.behavior == "merge":
        for data_key in ("data", "binaryData"):
            merged = {**(old.obj.get(data_key) or {}), **(new.obj.get(data_key) or {})}
            if merged:
                obj[data_key] = merged
    acc.res[idx] = replace(
        new,
        obj=obj,
        prev=old.prev,
        prefixes=old.prefixes,
        suffixes=old.suffixes,
        behavior="create",
        needs_hash=old.needs_hash and new.needs_hash,
        origin=old.origin if new.behavior == "merge" else new.origin,  # kustomize: replace is the new one's
    )
