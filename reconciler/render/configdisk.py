"""Config disks: ``configMap``, ``secret`` and ``sysprep`` volumes as ISO images, as
KubeVirt attaches them (one file per key; label ``cfgdata`` or the volume's
``volumeLabel``; ``unattendCD`` for sysprep), and where their objects come from.

Input: the volume source, the ConfigMaps and Secrets of the VM's namespace the build
produced (``ExpandedVM.config_maps`` / ``.secrets``) and the host config. Output: the
payload of a generated ISO (``VolumeSpec.content``, the same format as cloud-init's).

Resolution, as on KubeVirt, the build first, then the host: a ConfigMap of the build
is written into the payload (it is in git already); a Secret of the build is named in
the payload with the digest of its content (``repositorySecrets``), its values travel
beside it in ``VolumeSpec.secrets`` (never shown); any other object is named only and
read from the host's ``configMapsDirectory`` / ``secretsDirectory``
(``<namespace>/<name>/<key>``) when the ISO is built. A missing object is an error at
the VM's field unless the volume is ``optional``. ``finish`` adds the digests and says
in words, by name only, what each ISO is made of (``ConfigDigest``). Pure.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from reconciler.model import ConfigDigest
from reconciler.model.identifiers import is_dns_subdomain
from reconciler.model.secretdata import NO_SECRETS
from reconciler.model.secretdata import SCHEME as SECRET_SCHEME

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.model.secretdata import SecretData
    from reconciler.render.context import RenderContext

DEFAULT_LABEL = "cfgdata"
SYSPREP_LABEL = "unattendCD"
UNATTEND_FILES = ("autounattend.xml", "unattend.xml")


def in_build(ctx: RenderContext, ref: str) -> bool:
    return ctx.secrets.get(ref) is not None


def object_name(ctx: RenderContext, kind: str, name: str, where: str) -> None:
    """A ConfigMap's or Secret's name is a Kubernetes name (lower case, no ``/``): it is a
    directory of the host's configMapsDirectory / secretsDirectory when the ISO is built."""
    if not is_dns_subdomain(name):
        raise ctx.error(
            where,
            f"{kind} name {name[:64]!r} is not a Kubernetes name (lower-case letters, digits, '-' and '.')",
        )


NAMEREFS_EXAMPLE = "examples/kustomize/namerefs.yaml"


def hashed(ctx: RenderContext, kind: str, name: str, where: str) -> None:
    """The error for a reference to a generated object by the name it has before its hash
    suffix: why kustomize left it (KubeVirt's fields are not in its name-reference table)
    and the ``configurations:`` snippet that makes it rewrite this field."""
    for k, wanted, generated in ctx.hashed_names:
        if (k, wanted) != (kind, name):
            continue
        generator = "secretGenerator" if kind == "Secret" else "configMapGenerator"
        parts = [p for p in re.split(r"[.\[]", where) if p and not p.rstrip("]").isdigit()]
        if parts and (parts[-1].endswith("Ref") or parts[-1] in ("secret", "configMap")):
            parts.append("name")  # the reference's own name field
        spec_path = "/".join(parts)
        raise ctx.error(
            where,
            f"{kind} {name!r} is in the repository as {generated}: a {generator} adds its hash suffix "
            "to the name, and kustomize rewrites references to it only in the fields its "
            "name-reference table knows; KubeVirt's VirtualMachine fields are not among them. Tell "
            "kustomize about this one in the kustomization (`configurations: [namerefs.yaml]`, "
            f"namerefs.yaml: `nameReference: [{{kind: {kind}, fieldSpecs: [{{kind: VirtualMachine, "
            f"path: {spec_path}}}]}}]`; {NAMEREFS_EXAMPLE} lists every KubeVirt field), or set "
            "`generatorOptions: {disableNameSuffixHash: true}`",
        )


def secret_ref(ctx: RenderContext, name: str, where: str, optional: bool = False) -> str | None:
    """``namespace/name`` of a Secret the VM names: from the build, else the host's
    secretsDirectory; None for an optional one neither can hold."""
    object_name(ctx, "Secret", name, where)
    ref = f"{ctx.namespace}/{name}"
    if in_build(ctx, ref) or ctx.host.secrets_dir:
        return ref
    if optional:
        return None
    hashed(ctx, "Secret", name, where)
    raise ctx.error(
        where,
        f"Secret {name!r} is not in the repository (namespace {ctx.namespace}) and the host "
        "config sets no secretsDirectory: add it (a Secret or a secretGenerator), or set "
        "secretsDirectory in the host config (<secretsDirectory>/<namespace>/<name>/<key>, "
        "as KubeVirt mounts a Secret)",
    )


def _config_map(
    ctx: RenderContext, name: str, optional: bool, where: str
) -> tuple[dict[str, Any] | None, str | None]:
    """(files of the build's ConfigMap, None) or (None, ``namespace/name`` to read on the
    host); (None, None) for an optional one neither can hold."""
    object_name(ctx, "ConfigMap", name, where)
    data = dict(ctx.config_maps).get(name)
    if data is not None:
        return {key: {"text": text} if not binary else {"base64": text} for key, text, binary in data}, None
    if ctx.host.config_maps_dir:
        return None, f"{ctx.namespace}/{name}"
    if optional:
        return None, None
    hashed(ctx, "ConfigMap", name, where)
    raise ctx.error(
        where,
        f"ConfigMap {name!r} is not in the repository (namespace {ctx.namespace}) and the host "
        "config sets no configMapsDirectory: add it (a ConfigMap or a configMapGenerator), set "
        "configMapsDirectory in the host config, or mark the volume optional",
    )


def _payload(
    label: str,
    files: Mapping[str, Any] | None,
    *,
    config_map: str = "",
    host_config_map: str | None = None,
    secret: str | None = None,
    optional: bool = False,
    must_have: tuple[str, ...] = (),
) -> bytes:
    files = files or {}
    texts = {k: v["text"] for k, v in files.items() if "text" in v}
    binary = {k: v["base64"] for k, v in files.items() if "base64" in v}
    payload: dict[str, Any] = {"label": label, "files": texts}
    if binary:
        payload["binary"] = binary
    if config_map:
        payload["configMaps"] = [config_map]
    if host_config_map:
        payload["configMapDirs"] = [
            {"configMap": host_config_map, "optional": optional, "mustHave": list(must_have)}
        ]
    if secret:
        payload["secretDirs"] = [{"secret": secret, "optional": optional, "mustHave": list(must_have)}]
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


# The payload keys naming Secrets and ConfigMaps (``secret_refs``, ``finish``), as
# written by ``json.dumps`` with ``separators=(",", ":")``: a payload holding none of
# them names no object.
REFERENCE_KEYS = (b'"secretDirs":', b'"secrets":', b'"sshKeys":', b'"configMaps":', b'"configMapDirs":')


def secret_refs(obj: Mapping[str, Any]) -> list[str]:
    """Every Secret a payload names (secret / sysprep volumes, cloud-init, SSH keys), in order."""
    refs = [str(d["secret"]) for d in obj.get("secretDirs") or ()]
    refs += [str(r["secret"]) for r in obj.get("secrets") or ()]
    refs += [str(r) for r in (obj.get("sshKeys") or {}).get("secrets") or ()]
    return list(dict.fromkeys(refs))


def finish(ctx: RenderContext, volume: str, content: bytes) -> tuple[bytes, SecretData, ConfigDigest]:
    """A payload with the digest of each Secret of the build it names, those Secrets'
    values (for the ISO builder alone) and the ISO's ``ConfigDigest``."""
    if not any(key in content for key in REFERENCE_KEYS):  # names no object (most cloud-init ISOs)
        return (
            content,
            NO_SECRETS,
            ConfigDigest(volume, "", sys.intern(config_digest(content, False))),
        )
    obj = json.loads(content)
    refs = secret_refs(obj)
    repo = {r: ctx.secrets.digest(r) for r in refs if in_build(ctx, r)}
    if repo:
        obj["repositorySecrets"] = repo
        content = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    parts = [f"configMap {r}" for r in obj.get("configMaps") or ()]
    parts += [f"configMap {d['configMap']} (host)" for d in obj.get("configMapDirs") or ()]
    parts += [
        f"secret {r}" + (" (encrypted)" if ctx.secrets.sealed(r) else "")
        if r in repo
        else f"secret {r} (host)"
        for r in refs
    ]
    digest = config_digest(content, bool(repo))
    return content, ctx.secrets.subset(repo), ConfigDigest(volume, ", ".join(parts), sys.intern(digest))


def config_digest(content: bytes, secrets: bool) -> str:
    """A payload's digest: ``sha256:<hex>``, or ``sha256+scrypt:<hex>`` for one naming the
    build's Secrets by their scrypt digests (a mark recorded before those, with
    ``sha256:``, cannot be compared with it: ``compare.changes.config_changes``)."""
    prefix = f"sha256+{SECRET_SCHEME}" if secrets else "sha256"
    return f"{prefix}:{hashlib.sha256(content).hexdigest()}"


def _unattend(ctx: RenderContext, keys: list[str], what: str, where: str) -> None:
    if not any(k.lower() in UNATTEND_FILES for k in keys):
        raise ctx.error(
            where, f"{what} holds neither {' nor '.join(UNATTEND_FILES)}: Windows setup would find nothing"
        )


def config_map_payload(ctx: RenderContext, src: Mapping[str, Any], where: str) -> bytes:
    ctx.known(src, where, ("name", "optional", "volumeLabel"))
    name = ctx.string(src, "name", where)
    if not name:
        raise ctx.error(f"{where}.name", "a configMap volume needs the ConfigMap's name")
    optional = bool(ctx.boolean(src, "optional", where))
    label = ctx.string(src, "volumeLabel", where) or DEFAULT_LABEL
    files, host_ref = _config_map(ctx, name, optional, f"{where}.name")
    repo = f"{ctx.namespace}/{name}" if files is not None else ""
    return _payload(label, files, config_map=repo, host_config_map=host_ref, optional=optional)


def secret_payload(ctx: RenderContext, src: Mapping[str, Any], where: str) -> bytes:
    ctx.known(src, where, ("secretName", "optional", "volumeLabel"))
    name = ctx.string(src, "secretName", where)
    if not name:
        raise ctx.error(f"{where}.secretName", "a secret volume needs the Secret's name")
    optional = bool(ctx.boolean(src, "optional", where))
    label = ctx.string(src, "volumeLabel", where) or DEFAULT_LABEL
    ref = secret_ref(ctx, name, f"{where}.secretName", optional)
    return _payload(label, {}, secret=ref, optional=optional)


def sysprep_payload(ctx: RenderContext, src: Mapping[str, Any], where: str) -> bytes:
    ctx.known(src, where, ("configMap", "secret"))
    kinds = [k for k in ("configMap", "secret") if src.get(k) is not None]
    if len(kinds) != 1:
        raise ctx.error(where, "sysprep takes one of configMap or secret")
    ref = ctx.mapping(src, kinds[0], where) or {}
    ctx.known(ref, f"{where}.{kinds[0]}", ("name",))
    name = ctx.string(ref, "name", f"{where}.{kinds[0]}")
    if not name:
        raise ctx.error(f"{where}.{kinds[0]}.name", "sysprep needs the object's name")
    field = f"{where}.{kinds[0]}.name"
    if kinds[0] == "secret":
        secret = secret_ref(ctx, name, field)
        values = ctx.secrets.get(secret or "")
        if values is not None:
            _unattend(ctx, [k for k, _ in values], f"Secret {name!r}", field)
        return _payload(SYSPREP_LABEL, {}, secret=secret, must_have=UNATTEND_FILES)
    files, host_ref = _config_map(ctx, name, False, field)
    if files is not None:
        _unattend(ctx, list(files), f"ConfigMap {name!r}", field)
    repo = f"{ctx.namespace}/{name}" if files is not None else ""
    return _payload(SYSPREP_LABEL, files, config_map=repo, host_config_map=host_ref, must_have=UNATTEND_FILES)
