"""Config disks: ``configMap``, ``secret`` and ``sysprep`` volumes as ISO images, as
KubeVirt attaches them (one file per key; label ``cfgdata`` or the volume's
``volumeLabel``; ``unattendCD`` for sysprep).

Input: the volume source and the ConfigMaps of the VM's namespace the expansion found
in the repository (``ExpandedVM.config_maps``). Output: the payload of a generated ISO
(``VolumeSpec.content``, the same format as cloud-init's). A ConfigMap's keys are
written into the payload (they are in git already); a Secret is named only, and read
from the host's ``secretsDirectory`` (``<namespace>/<name>/<key>``) when the ISO is
built, never rendered, planned or logged. Pure.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.render.context import RenderContext

DEFAULT_LABEL = "cfgdata"
SYSPREP_LABEL = "unattendCD"
UNATTEND_FILES = ("autounattend.xml", "unattend.xml")


def _config_map_files(ctx: RenderContext, name: str, optional: bool, where: str) -> dict[str, Any]:
    data = dict(ctx.vm.config_maps).get(name)
    if data is None:
        if optional:
            return {}
        raise ctx.error(
            where,
            f"ConfigMap {name!r} is not in the repository (namespace {ctx.vm.namespace}): "
            "add it (a ConfigMap or a configMapGenerator) or mark the volume optional",
        )
    return {key: {"text": text} if not binary else {"base64": text} for key, text, binary in data}


def _secret_name(ctx: RenderContext, name: str, where: str) -> str:
    if not ctx.host.secrets_dir:
        raise ctx.error(
            where,
            "Secrets are read from the host: set secretsDirectory in the host config "
            "(<secretsDirectory>/<namespace>/<name>/<key>, as KubeVirt mounts a Secret)",
        )
    return f"{ctx.vm.namespace}/{name}"


def _payload(
    label: str,
    files: Mapping[str, Any],
    secret: str = "",
    optional: bool = False,
    must_have: tuple[str, ...] = (),
) -> bytes:
    texts = {k: v["text"] for k, v in files.items() if "text" in v}
    binary = {k: v["base64"] for k, v in files.items() if "base64" in v}
    payload: dict[str, Any] = {"label": label, "files": texts}
    if binary:
        payload["binary"] = binary
    if secret:
        payload["secretDirs"] = [{"secret": secret, "optional": optional, "mustHave": list(must_have)}]
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def config_map_payload(ctx: RenderContext, src: Mapping[str, Any], where: str) -> bytes:
    ctx.known(src, where, ("name", "optional", "volumeLabel"))
    name = ctx.string(src, "name", where)
    if not name:
        raise ctx.error(f"{where}.name", "a configMap volume needs the ConfigMap's name")
    optional = bool(ctx.boolean(src, "optional", where))
    label = ctx.string(src, "volumeLabel", where) or DEFAULT_LABEL
    return _payload(label, _config_map_files(ctx, name, optional, f"{where}.name"))


def secret_payload(ctx: RenderContext, src: Mapping[str, Any], where: str) -> bytes:
    ctx.known(src, where, ("secretName", "optional", "volumeLabel"))
    name = ctx.string(src, "secretName", where)
    if not name:
        raise ctx.error(f"{where}.secretName", "a secret volume needs the Secret's name")
    optional = bool(ctx.boolean(src, "optional", where))
    label = ctx.string(src, "volumeLabel", where) or DEFAULT_LABEL
    return _payload(label, {}, _secret_name(ctx, name, f"{where}.secretName"), optional)


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
    if kinds[0] == "secret":
        secret = _secret_name(ctx, name, f"{where}.secret")
        return _payload(SYSPREP_LABEL, {}, secret, must_have=UNATTEND_FILES)
    files = _config_map_files(ctx, name, False, f"{where}.configMap.name")
    if not any(k.lower() in UNATTEND_FILES for k in files):
        raise ctx.error(
            f"{where}.configMap.name",
            f"ConfigMap {name!r} holds neither {' nor '.join(UNATTEND_FILES)}: Windows setup would find nothing",
        )
    return _payload(SYSPREP_LABEL, files)
