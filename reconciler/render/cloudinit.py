"""Cloud-init data sources: the files of a NoCloud or ConfigDrive disk.

Input: a ``cloudInitNoCloud`` / ``cloudInitConfigDrive`` volume of the expanded
spec. Output: a deterministic payload (canonical JSON: volume label and file
contents) that ``provision`` turns into an ISO 9660 image with pycdlib. Pure: the
ISO itself (which carries timestamps) is built on the host, not here.
Secret references are rejected: a host has no Kubernetes secrets.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from reconciler.render.context import RenderContext

NOCLOUD_LABEL = "cidata"
CONFIGDRIVE_LABEL = "config-2"
KEYS = ("userData", "userDataBase64", "networkData", "networkDataBase64")
SECRET_KEYS = ("secretRef", "userDataSecretRef", "networkDataSecretRef")


def _text(ctx: RenderContext, src: Mapping[str, Any], plain: str, b64: str, where: str) -> str | None:
    if src.get(plain) is not None and src.get(b64) is not None:
        raise ctx.error(f"{where}.{plain}", f"{plain} and {b64} cannot both be set")
    if src.get(plain) is not None:
        return ctx.string(src, plain, where)
    if src.get(b64) is not None:
        raw = ctx.string(src, b64, where)
        try:
            return base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as err:
            raise ctx.error(f"{where}.{b64}", "not valid base64 of UTF-8 text") from err
    return None


def cloud_init_payload(ctx: RenderContext, kind: str, src: Mapping[str, Any], where: str) -> bytes:
    for key in SECRET_KEYS:
        if src.get(key) is not None:
            raise ctx.error(
                f"{where}.{key}", "secret references are not supported on a libvirt host; inline the data"
            )
    ctx.known(src, where, KEYS, SECRET_KEYS)
    user = _text(ctx, src, "userData", "userDataBase64", where)
    network = _text(ctx, src, "networkData", "networkDataBase64", where)
    if user is None and network is None:
        raise ctx.error(where, "userData or networkData is required")
    instance_id = f"{ctx.vm.name}.{ctx.vm.namespace}"
    files: dict[str, str] = {}
    if kind == "cloudInitNoCloud":
        label = NOCLOUD_LABEL
        files["meta-data"] = f"instance-id: {instance_id}\nlocal-hostname: {ctx.vm.name}\n"
        files["user-data"] = user or ""
        if network is not None:
            files["network-config"] = network
    else:
        label = CONFIGDRIVE_LABEL
        meta = {"instance_id": instance_id, "uuid": ctx.uuid, "hostname": ctx.vm.name}
        files["openstack/latest/meta_data.json"] = json.dumps(meta, sort_keys=True)
        if user is not None:
            files["openstack/latest/user_data"] = user
        if network is not None:
            files["openstack/latest/network_data.json"] = network
    return json.dumps({"label": label, "files": files}, sort_keys=True, separators=(",", ":")).encode()


def parse_payload(content: bytes) -> tuple[str, dict[str, str]]:
    """The inverse of ``cloud_init_payload``: (volume label, {path: text})."""
    obj = json.loads(content)
    return str(obj["label"]), {str(k): str(v) for k, v in obj["files"].items()}
