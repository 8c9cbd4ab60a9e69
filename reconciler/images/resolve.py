"""Resolution, the host-side stage before render: each image reference of a revision
becomes a file of this host's store, known by its digest.

Input: the revision's catalog (its VMs, Secrets and ConfigMaps), the host config, the
host's ``ImageStore`` and the sources by kind (``http`` here, ``registry`` the
registry's; ``sources.Resolver``). Output: the host config with every reference in
its ``images`` map (``ImageSource`` with path, format and digest; the config's own
entries first, untouched: a local override) and ``images_resolved`` set, plus one
error ``Problem`` per VM and reference that could not be resolved, naming the VM,
the image and the reason (with the file and line of the VM).

References: ``containerDisk.image`` (with ``imagePullPolicy`` and ``imagePullSecret``)
and a DataVolume template's ``source.http.url`` / ``source.registry.url``. A
reference the store's index holds is used as it is unless its policy is ``Always``
(then the source resolves it again, and bytes already stored under the digest it
names are not fetched twice); ``Never`` uses the store alone.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

from reconciler.images.sources import PULL_POLICIES, Auth, ImageError, ImageRef, PullPolicy, RefKind
from reconciler.model import Problem
from reconciler.records import dataclass
from reconciler.settings.host import ImageSource

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from reconciler.catalog import Catalog
    from reconciler.images.sources import Resolver, StoredImage
    from reconciler.images.store import ImageStore
    from reconciler.model import Manifest, VMKey
    from reconciler.settings.host import HostConfig


@dataclass(frozen=True, slots=True)
class Use:
    """One reference of one VM, with what it needs to be fetched."""

    ref: ImageRef
    key: str  # its key in the host config's image map
    field: str  # where the VM writes it
    auth_from: Mapping[str, Any]  # the source's own mapping (secretRef, headers, ...)


def _image_policy(src: Mapping[str, Any]) -> PullPolicy:
    """KubeVirt's default: Always for ``:latest`` or no tag, else IfNotPresent."""
    given = src.get("imagePullPolicy")
    if isinstance(given, str) and given in PULL_POLICIES:
        return given
    image = str(src.get("image", ""))
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    return "Always" if ":" not in last or last.endswith(":latest") else "IfNotPresent"


def references(vm: Mapping[str, Any]) -> Iterator[Use]:
    """The image references of one VirtualMachine object, in the order written."""
    spec = vm.get("spec") or {}
    tspec = ((spec.get("template") or {}).get("spec")) or {}
    for i, vol in enumerate(tspec.get("volumes") or ()):
        src = vol.get("containerDisk") if isinstance(vol, dict) else None
        if isinstance(src, dict) and isinstance(src.get("image"), str) and src["image"]:
            where = f"spec.template.spec.volumes[{i}].containerDisk.image"
            ref = ImageRef("containerDisk", src["image"], _image_policy(src))
            yield Use(ref, src["image"], where, src)
    for i, t in enumerate(spec.get("dataVolumeTemplates") or ()):
        source = (((t or {}).get("spec") or {}).get("source")) if isinstance(t, dict) else None
        for kind in ("http", "registry"):
            s = source.get(kind) if isinstance(source, dict) else None
            if isinstance(s, dict) and isinstance(s.get("url"), str) and s["url"]:
                url = s["url"]
                key = url.removeprefix("docker://") if kind == "registry" else url
                rk: RefKind = "http" if kind == "http" else "registry"
                where = f"spec.dataVolumeTemplates[{i}].spec.source.{kind}.url"
                yield Use(ImageRef(rk, key if kind == "registry" else url), key, where, s)


def _data(catalog: Catalog, kind: str, namespace: str, name: str) -> dict[str, str]:
    """A Secret's or ConfigMap's keys as text (``data`` decoded for a Secret)."""
    m = catalog.get(kind, namespace, name)
    if m is None:
        raise ImageError(f"{kind} {namespace}/{name} is not in the repository")
    out: dict[str, str] = {}
    for block in ("data", "stringData"):
        for k, v in (m.obj.get(block) or {}).items():
            if not isinstance(v, str):
                continue
            if kind == "Secret" and block == "data":
                try:
                    v = base64.b64decode("".join(v.split()), validate=True).decode()
                except (binascii.Error, UnicodeDecodeError):
                    raise ImageError(f"Secret {namespace}/{name} key {k} is not base64 text") from None
            out[str(k)] = v
    return out


def _header(line: str, origin: str) -> tuple[str, str]:
    name, sep, value = line.partition(":")
    if not sep or not name.strip():
        raise ImageError(f"{origin}: a header is written 'Name: value'")
    return name.strip(), value.strip()


def auth_for(use: Use, catalog: Catalog, namespace: str) -> Auth | None:
    """The credentials of an ``http`` or ``registry`` source, read as CDI reads them; a
    containerDisk's ``imagePullSecret`` (a ``kubernetes.io/dockerconfigjson`` Secret)."""
    s = use.auth_from
    if use.ref.kind == "containerDisk":
        if not isinstance(name := s.get("imagePullSecret"), str) or not name:
            return None  # the host's registries.authFile, if any (``registry_source``)
        doc = _data(catalog, "Secret", namespace, name).get(".dockerconfigjson")
        if doc is None:
            raise ImageError(
                f"imagePullSecret {name}: no .dockerconfigjson key (a kubernetes.io/dockerconfigjson Secret)"
            )
        return Auth(config_json=doc)
    user = password = ca = ""
    headers: dict[str, str] = {}
    if isinstance(ref := s.get("secretRef"), str) and ref:
        d = _data(catalog, "Secret", namespace, ref)
        user, password = d.get("accessKeyId", ""), d.get("secretKey", "")
    if isinstance(cm := s.get("certConfigMap"), str) and cm:
        ca = "\n".join(_data(catalog, "ConfigMap", namespace, cm).values())
    for line in s.get("extraHeaders") or ():
        k, v = _header(str(line), "extraHeaders")
        headers[k] = v
    for name in s.get("secretExtraHeaders") or ():
        for line in _data(catalog, "Secret", namespace, str(name)).values():
            k, v = _header(line, f"secretExtraHeaders {name}")
            headers[k] = v
    if not (user or password or ca or headers):
        return None
    return Auth(username=user, password=password, headers=headers, ca_bundle=ca)


def fetch_one(use: Use, store: ImageStore, sources: Mapping[str, Resolver], auth: Auth | None) -> StoredImage:
    """The stored image of one reference: from the index, or resolved and fetched."""
    ref = use.ref
    stored = store.lookup(use.key)
    if stored is not None and ref.policy != "Always":
        return stored
    if ref.policy == "Never":
        raise ImageError("imagePullPolicy is Never and the image store does not hold it")
    source = sources.get(ref.kind)
    if source is None:
        raise ImageError(f"no source of kind {ref.kind} is available on this host")
    resolved = source.resolve(ref, ref.policy, auth)
    if stored is not None and resolved.digest and stored.digest == resolved.digest:
        return stored
    if resolved.digest and (same := store.by_digest(resolved.digest)) is not None:
        return store.alias(use.key, same)
    store.check_room(resolved.size)
    fetched = source.fetch(resolved, store.partial_dir(), auth)
    return store.put(fetched, use.key, resolved.file_digest, resolved.digest)


def resolve_images(
    catalog: Catalog, host: HostConfig, store: ImageStore, sources: Mapping[str, Resolver]
) -> tuple[HostConfig, tuple[Problem, ...]]:
    """The host config with every reference of ``catalog`` resolved (see the module)."""
    found: dict[str, ImageSource] = {}
    failed: dict[str, ImageError] = {}
    problems: list[Problem] = []
    for vmkey, m in catalog.keyed_vms():
        for use in references(m.obj):
            if use.key in host.images:
                continue
            if use.key not in found and use.key not in failed:
                try:
                    auth = auth_for(use, catalog, vmkey.namespace)
                    got = fetch_one(use, store, sources, auth)
                    found[use.key] = ImageSource(got.path, got.format, got.digest)
                except ImageError as err:
                    failed[use.key] = err
                except OSError as err:  # the store itself: not writable, no room on its disk
                    failed[use.key] = ImageError(f"the image store {store.root}: {err.strerror or err}")
            if use.key in failed:
                problems.append(_refused(vmkey, m, use, failed[use.key]))
    with contextlib.suppress(OSError):  # when each was last used: for garbage collection only
        store.touch(found)
    merged = {**found, **host.images}
    return dataclasses.replace(host, images=merged, images_resolved=True), tuple(problems)


def _refused(vmkey: VMKey, m: Manifest, use: Use, err: ImageError) -> Problem:
    return Problem(
        f"image {use.key}: {err}",
        vm=vmkey,
        path=m.path,
        line=m.line,
        field=use.field,
        transient=err.transient,
    )


__all__ = ["Use", "auth_for", "fetch_one", "references", "resolve_images"]
