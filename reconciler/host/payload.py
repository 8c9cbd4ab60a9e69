"""The files of a generated ISO: its payload with the ConfigMaps and Secrets it names.

Input: a payload made by ``render.cloudinit`` / ``render.configdisk``, the build's
Secrets it names (``VolumeSpec.secrets``) and the ``HostConfig``. Output: (volume
label, {path: text or bytes}), or a ``ProvisionError`` naming the object and key,
never a value. I/O: reads the host's directories, nothing else.

Resolution, as on KubeVirt: the build first (a Secret listed in
``repositorySecrets`` is taken from ``secrets`` and must match its digest), then the
host: ``<secretsDirectory>`` / ``<configMapsDirectory>`` ``/<namespace>/<name>/<key>``,
one regular file per key, as KubeVirt mounts a Secret or a ConfigMap (names starting
with ``.`` are skipped, so a kubelet-style ``..data`` link works). The namespace and
name must be one path component each, and every directory and key, with symlinks
resolved, must stay inside its base directory. An ``optional`` volume whose object
is nowhere is empty.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.errors import ManifestError, ReconcilerError
from reconciler.manifests import limits
from reconciler.model.secretdata import NO_SECRETS, SecretData
from reconciler.render.cloudinit import parse_payload, payload_secrets

if TYPE_CHECKING:
    from reconciler.settings.host import HostConfig

SECRETS = ("Secret", "secretsDirectory")
CONFIG_MAPS = ("ConfigMap", "configMapsDirectory")


class ProvisionError(ReconcilerError):
    """A host resource could not be created or failed a safety check (permanent)."""

    def __init__(self, subject: str, message: str) -> None:
        self.subject = subject
        super().__init__(f"{subject}: {message}")


def _inside(real: str, base: str) -> bool:
    return real.startswith(base.rstrip("/") + "/")


def _object_dir(base: str, what: tuple[str, str], ref: str, subject: str, optional: bool) -> Path | None:
    """The directory of one object (``namespace/name``); None if optional and absent."""
    kind, setting = what
    namespace, _, name = ref.partition("/")
    if not base:
        if optional:
            return None
        raise ProvisionError(subject, f"{kind} {ref}: the host config sets no {setting}")
    if any(p in ("", ".", "..") or "/" in p or "\x00" in p for p in (namespace, name)):
        raise ProvisionError(subject, f"{kind} {ref}: not a namespace/name")
    d = Path(base) / namespace / name
    if not d.is_dir():
        if optional:
            return None
        raise ProvisionError(
            subject, f"{kind} {ref}: no directory {d} (one file per key, as KubeVirt mounts it)"
        )
    if not _inside(os.path.realpath(d), os.path.realpath(base)):
        raise ProvisionError(subject, f"{kind} {ref}: {d} leads outside {setting} {base}")
    return d


def _read_keys(d: Path, base: str, what: tuple[str, str], ref: str, subject: str) -> dict[str, bytes]:
    """Every key of an object's directory: one regular file each, inside the base directory."""
    kind, setting = what
    real_base = os.path.realpath(base)
    out: dict[str, bytes] = {}
    for f in sorted(p for p in d.iterdir() if not p.name.startswith(".") and p.is_file()):
        if not _inside(os.path.realpath(f), real_base):
            raise ProvisionError(subject, f"{kind} {ref} key {f.name}: leads outside {setting} {base}")
        try:
            out[f.name] = limits.read_regular_file(f)
        except (OSError, ManifestError) as err:
            raise ProvisionError(subject, f"{kind} {ref} key {f.name}: cannot read it ({err})") from err
    return out


class _Objects:
    """The ConfigMaps and Secrets one payload names: the build's, else the host's."""

    def __init__(self, obj: dict[str, Any], host: HostConfig, secrets: SecretData, subject: str) -> None:
        self.repo: dict[str, str] = dict(obj.get("repositorySecrets") or {})
        self.host, self.secrets, self.subject = host, secrets, subject

    def secret(self, ref: str, optional: bool = False) -> dict[str, bytes] | None:
        if ref in self.repo:
            values = self.secrets.get(ref)
            if values is None or self.secrets.digest(ref) != self.repo[ref]:
                raise ProvisionError(
                    self.subject,
                    f"Secret {ref}: the build's values are not at hand (render the revision again)",
                )
            return dict(values)
        d = _object_dir(self.host.secrets_dir, SECRETS, ref, self.subject, optional)
        return None if d is None else _read_keys(d, self.host.secrets_dir, SECRETS, ref, self.subject)

    def config_map(self, ref: str, optional: bool) -> dict[str, bytes] | None:
        base = self.host.config_maps_dir
        d = _object_dir(base, CONFIG_MAPS, ref, self.subject, optional)
        return None if d is None else _read_keys(d, base, CONFIG_MAPS, ref, self.subject)

    def text(self, ref: str, keys: list[str]) -> str:
        values = self.secret(ref) or {}
        for key in keys:
            if key in values:
                try:
                    return values[key].decode("utf-8")
                except UnicodeError as err:
                    raise ProvisionError(self.subject, f"Secret {ref} key {key}: not UTF-8 text") from err
        raise ProvisionError(
            self.subject, f"Secret {ref} has no key {' or '.join(keys)} (keys: {', '.join(sorted(values))})"
        )

    def ssh_keys(self, refs: list[str]) -> list[str]:
        """Every public key of the Secrets (each key a public key or a list of them), in order."""
        keys: list[str] = []
        for ref in refs:
            for name, value in sorted((self.secret(ref) or {}).items()):
                try:
                    text = value.decode("utf-8")
                except UnicodeError as err:
                    raise ProvisionError(self.subject, f"Secret {ref} key {name}: not UTF-8 text") from err
                keys += [
                    line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
                ]
        return keys


def _directory_files(objects: _Objects, kind: str, spec: dict[str, Any]) -> dict[str, str | bytes]:
    """Every key of a ConfigMap or Secret (one file each), for a volume or sysprep."""
    optional = bool(spec.get("optional"))
    ref = str(spec[kind])
    got = objects.secret(ref, optional) if kind == "secret" else objects.config_map(ref, optional)
    files: dict[str, str | bytes] = dict(got or {})
    must = list(spec.get("mustHave") or ())
    if got is not None and must and not any(k.lower() in must for k in files):
        what = "Secret" if kind == "secret" else "ConfigMap"
        raise ProvisionError(
            objects.subject,
            f"{what} {ref} holds neither {' nor '.join(must)} (keys: {', '.join(sorted(files))})",
        )
    return files


def payload_files(content: bytes) -> tuple[str, dict[str, str | bytes]]:
    """A payload's label and the files it carries itself (text, and binary in base64)."""
    label, texts = parse_payload(content)
    files: dict[str, str | bytes] = dict(texts)
    for name, data in (json.loads(content).get("binary") or {}).items():
        files[str(name)] = base64.b64decode(str(data))
    return label, files


def carries_secrets(content: bytes) -> bool:
    """Whether the ISO of this payload holds Secret values (it is then QEMU's alone)."""
    refs, ssh = payload_secrets(content)
    return bool(refs or ssh or json.loads(content).get("secretDirs"))


def resolve_payload(
    content: bytes, host: HostConfig, subject: str, secrets: SecretData = NO_SECRETS
) -> tuple[str, dict[str, str | bytes]]:
    """The files of a generated ISO with the ConfigMaps and Secrets it names read (see
    the module doc)."""
    obj = json.loads(content)
    objects = _Objects(obj, host, secrets, subject)
    label, files = payload_files(content)
    for spec in obj.get("configMapDirs") or ():
        files.update(_directory_files(objects, "configMap", spec))
    for spec in obj.get("secretDirs") or ():
        files.update(_directory_files(objects, "secret", spec))
    refs, ssh = payload_secrets(content)
    for ref in refs:
        files[ref["file"]] = objects.text(ref["secret"], list(ref["keys"]))
    if ssh:
        keys = objects.ssh_keys(list(ssh["secrets"]))
        got = files.get(ssh["file"], "")
        user = got.decode("utf-8") if isinstance(got, bytes) else got
        if user and not user.startswith("#cloud-config"):
            raise ProvisionError(
                subject, "SSH keys from accessCredentials need cloud-config user data (#cloud-config)"
            )
        if "ssh_authorized_keys" in user:
            raise ProvisionError(
                subject, "user data already has ssh_authorized_keys: give the keys in one place"
            )
        body = user if user else "#cloud-config\n"
        if not body.endswith("\n"):
            body += "\n"
        body += "ssh_authorized_keys:\n" + "".join(f"  - {json.dumps(k)}\n" for k in keys)
        files[ssh["file"]] = body
    return label, files
