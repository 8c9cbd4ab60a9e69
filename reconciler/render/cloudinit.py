"""Cloud-init data sources: the files of a NoCloud or ConfigDrive disk.

Input: a ``cloudInitNoCloud`` / ``cloudInitConfigDrive`` volume of the expanded
spec and the VM's ``accessCredentials``. Output: a deterministic payload (canonical
JSON: volume label, file contents, and references to Secrets) that ``provision``
turns into an ISO 9660 image with pycdlib. Pure: the ISO itself (which carries
timestamps) is built on the host, not here.

Secrets (``secretRef`` / ``userDataSecretRef``, ``networkDataSecretRef``, SSH keys
of ``accessCredentials`` propagated by ``noCloud`` / ``configDrive``) come from the
build (a Secret or a secretGenerator), else from the host, as KubeVirt mounts them:
``<secretsDirectory>/<namespace>/<name>/<key>`` (``configdisk.secret_ref``). A
Secret of the build is checked as the ISO builder reads it: user or network data needs
its key (``userdata`` / ``networkdata``, either spelling) and UTF-8 text, SSH keys UTF-8
text. The
payload carries only their names (and, for the build's, a digest), so no secret
reaches rendered XML, plans, diffs or logs; the ISO builder reads the values.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from reconciler.render.configdisk import secret_ref
from reconciler.render.context import SPEC, Guest, RenderContext

NOCLOUD_LABEL = "cidata"
CONFIGDRIVE_LABEL = "config-2"
KEYS = ("userData", "userDataBase64", "networkData", "networkDataBase64")
SECRET_KEYS = ("secretRef", "userDataSecretRef", "networkDataSecretRef")
# Keys of the Secret KubeVirt reads (either spelling).
USER_DATA_KEYS = ("userdata", "userData")
NETWORK_DATA_KEYS = ("networkdata", "networkData")
PROPAGATION = MappingProxyType({"cloudInitNoCloud": "noCloud", "cloudInitConfigDrive": "configDrive"})


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


def _utf8(ctx: RenderContext, ref: str, key: str, value: bytes, where: str) -> None:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        raise ctx.error(where, f"Secret {ref} key {key}: not UTF-8 text (cloud-init reads text)") from None


def _secret_ref(
    ctx: RenderContext, src: Mapping[str, Any], key: str, where: str, keys: tuple[str, ...]
) -> str | None:
    """The Secret of user or network data; one of the build must hold one of ``keys``
    as UTF-8 text (what the ISO builder reads), checked here so validate refuses it."""
    ref = ctx.mapping(src, key, where)
    if ref is None:
        return None
    ctx.known(ref, f"{where}.{key}", ("name",))
    name = ctx.string(ref, "name", f"{where}.{key}")
    if not name:
        raise ctx.error(f"{where}.{key}.name", "a secret reference needs a name")
    got = secret_ref(ctx, name, f"{where}.{key}")
    values = dict(ctx.secrets.get(got or "") or ())
    if got is not None and ctx.secrets.get(got) is not None:
        found = next((k for k in keys if k in values), None)
        if found is None:
            raise ctx.error(
                f"{where}.{key}.name",
                f"Secret {name} has no key {' or '.join(keys)} (keys: {', '.join(sorted(values)) or 'none'})",
            )
        _utf8(ctx, got, found, values[found], f"{where}.{key}.name")
    return got


def ssh_key_secrets(ctx: RenderContext, kind: str) -> list[str]:
    """``namespace/name`` of each Secret of SSH public keys ``accessCredentials`` propagates
    through this cloud-init kind (KubeVirt: ``propagationMethod.noCloud`` / ``configDrive``)."""
    out = []
    for i, cred in enumerate(ctx.items(ctx.spec, "accessCredentials", SPEC)):
        where = f"{SPEC}.accessCredentials[{i}]"
        ssh = cred.get("sshPublicKey")
        if not isinstance(ssh, Mapping):
            continue
        method = ssh.get("propagationMethod") or {}
        if isinstance(method, Mapping) and PROPAGATION[kind] in method:
            secret = ((ssh.get("source") or {}).get("secret") or {}).get("secretName")
            if not secret:
                raise ctx.error(f"{where}.sshPublicKey.source.secret.secretName", "a Secret name is required")
            field = f"{where}.sshPublicKey.source.secret.secretName"
            ref = secret_ref(ctx, str(secret), field)
            if ref is not None:
                for key, value in ctx.secrets.get(ref) or ():
                    _utf8(ctx, ref, key, value, field)
                out.append(ref)
    return out


def check_access_credentials(ctx: RenderContext) -> None:
    """``accessCredentials``: SSH keys propagated through a cloud-init volume the VM has;
    what a libvirt host cannot do (the guest agent, passwords) is refused."""
    kinds = {k for v in ctx.items(ctx.spec, "volumes", SPEC) for k in PROPAGATION if v.get(k) is not None}
    for i, cred in enumerate(ctx.items(ctx.spec, "accessCredentials", SPEC)):
        where = f"{SPEC}.accessCredentials[{i}]"
        ctx.known(cred, where, ("sshPublicKey", "userPassword"))
        if cred.get("userPassword") is not None:
            raise ctx.error(
                f"{where}.userPassword",
                "passwords are set through the guest agent, which a libvirt host does not drive yet",
            )
        ssh = ctx.mapping(cred, "sshPublicKey", where)
        if ssh is None:
            raise ctx.error(where, "a credential needs sshPublicKey")
        ctx.known(ssh, f"{where}.sshPublicKey", ("source", "propagationMethod"))
        method = ctx.mapping(ssh, "propagationMethod", f"{where}.sshPublicKey") or {}
        ctx.known(
            method, f"{where}.sshPublicKey.propagationMethod", ("noCloud", "configDrive", "qemuGuestAgent")
        )
        if method.get("qemuGuestAgent") is not None:
            raise ctx.error(
                f"{where}.sshPublicKey.propagationMethod.qemuGuestAgent",
                "the guest agent propagation is not driven on a libvirt host yet: use noCloud or configDrive",
            )
        for kind, name in PROPAGATION.items():
            if name in method and kind not in kinds:
                raise ctx.error(
                    f"{where}.sshPublicKey.propagationMethod.{name}",
                    f"{name} propagation needs a {kind} volume",
                )
        if not method:
            raise ctx.error(f"{where}.sshPublicKey.propagationMethod", "give noCloud: {} or configDrive: {}")


def cloud_init_payload(
    ctx: RenderContext, guest: Guest, kind: str, src: Mapping[str, Any], where: str
) -> bytes:
    ctx.known(src, where, KEYS + SECRET_KEYS)
    if src.get("secretRef") is not None and src.get("userDataSecretRef") is not None:
        raise ctx.error(f"{where}.userDataSecretRef", "secretRef and userDataSecretRef name the same thing")
    user_ref = _secret_ref(ctx, src, "secretRef", where, USER_DATA_KEYS) or _secret_ref(
        ctx, src, "userDataSecretRef", where, USER_DATA_KEYS
    )
    network_ref = _secret_ref(ctx, src, "networkDataSecretRef", where, NETWORK_DATA_KEYS)
    user = _text(ctx, src, "userData", "userDataBase64", where)
    network = _text(ctx, src, "networkData", "networkDataBase64", where)
    if user is not None and user_ref:
        raise ctx.error(f"{where}.secretRef", "user data is given both inline and by a Secret")
    if network is not None and network_ref:
        raise ctx.error(f"{where}.networkDataSecretRef", "network data is given both inline and by a Secret")
    ssh_keys = ssh_key_secrets(ctx, kind)
    if user is None and network is None and not user_ref and not network_ref and not ssh_keys:
        raise ctx.error(where, "userData or networkData is required")
    if ssh_keys and user is not None and not user.startswith("#cloud-config"):
        raise ctx.error(
            f"{where}.userData",
            "SSH keys from accessCredentials go into cloud-config user data (#cloud-config)",
        )
    instance_id = guest.instance_id
    files: dict[str, str] = {}
    if kind == "cloudInitNoCloud":
        label = NOCLOUD_LABEL
        user_file, network_file = "user-data", "network-config"
        files["meta-data"] = f"instance-id: {instance_id}\nlocal-hostname: {guest.hostname}\n"
        files[user_file] = user or ""
        if network is not None:
            files[network_file] = network
    else:
        label = CONFIGDRIVE_LABEL
        user_file, network_file = "openstack/latest/user_data", "openstack/latest/network_data.json"
        meta = {"instance_id": instance_id, "uuid": guest.uuid, "hostname": guest.hostname}
        files["openstack/latest/meta_data.json"] = json.dumps(meta, sort_keys=True)
        if user is not None or user_ref or ssh_keys:
            files[user_file] = user or ""
        if network is not None:
            files[network_file] = network
    payload: dict[str, Any] = {"label": label, "files": files}
    secrets = []
    if user_ref:
        secrets.append({"file": user_file, "secret": user_ref, "keys": list(USER_DATA_KEYS)})
    if network_ref:
        secrets.append({"file": network_file, "secret": network_ref, "keys": list(NETWORK_DATA_KEYS)})
    if secrets:
        payload["secrets"] = secrets
    if ssh_keys:
        payload["sshKeys"] = {"file": user_file, "secrets": ssh_keys}
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def parse_payload(content: bytes) -> tuple[str, dict[str, str]]:
    """The inverse of ``cloud_init_payload``: (volume label, {path: text})."""
    obj = json.loads(content)
    return str(obj["label"]), {str(k): str(v) for k, v in obj["files"].items()}


def payload_secrets(content: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The Secret references of a payload: ([{file, secret, keys}], {file, secrets})."""
    obj = json.loads(content)
    return list(obj.get("secrets") or []), dict(obj.get("sshKeys") or {})
