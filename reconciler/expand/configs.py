"""The ConfigMaps and Secrets of the build that a VM's spec names.

Input: the expanded ``spec.template.spec``, the catalog of the same build and the VM's
namespace. Output: the ConfigMaps (``config_maps``: their keys, as in git) and the
Secrets (``secrets``: a ``SecretData``, values decoded from ``data`` (base64) and
``stringData``, never shown) for ``ExpandedVM``. Objects the build does not hold are
left to the host (``configMapsDirectory`` / ``secretsDirectory``, see render). Pure.

What names a Secret, as on KubeVirt: ``volumes[].secret.secretName``,
``volumes[].sysprep.secret.name``, ``volumes[].cloudInitNoCloud`` /
``cloudInitConfigDrive`` ``secretRef`` / ``userDataSecretRef`` /
``networkDataSecretRef``, and ``accessCredentials[].sshPublicKey.source.secret.secretName``.
A malformed Secret or ConfigMap is an error at its own file:line naming the key, never
the value, so validate refuses what the ISO builder would: a block that is no mapping, a
key that is no file name (``""``, ``..``, ``a/b``, ``../x``: ``identifiers.is_config_key``),
a value that is no string, ``data`` / ``binaryData`` that is no base64, and one key in
two blocks of a ConfigMap.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING, Any

from reconciler.catalog import Catalog, manifest_error
from reconciler.manifests.limits import MAX_SECRETS_PER_VM
from reconciler.model.identifiers import CONFIG_KEY_FORM, is_config_key
from reconciler.model.secretdata import NO_SECRETS, SecretData
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.model import Manifest

CLOUD_INIT = ("cloudInitNoCloud", "cloudInitConfigDrive")
CLOUD_INIT_REFS = ("secretRef", "userDataSecretRef", "networkDataSecretRef")


def _name(ref: Any, key: str) -> str | None:
    if isinstance(ref, dict) and isinstance(ref.get(key), str) and ref[key]:
        return str(ref[key])
    return None


@dataclass(frozen=True, slots=True)
class Names:
    """The ConfigMaps and Secrets a VM's spec names, each list sorted and without repeats."""

    config_maps: list[str]
    secrets: list[str]


def names(tspec: Mapping[str, Any]) -> Names:
    """The names of ``tspec`` (one pass over its volumes; see the module doc)."""
    maps: set[str | None] = set()
    secrets: set[str | None] = set()
    for vol in tspec.get("volumes") or ():
        if not isinstance(vol, dict):
            continue
        if "configMap" in vol:
            maps.add(_name(vol["configMap"], "name"))
        if "secret" in vol:
            secrets.add(_name(vol["secret"], "secretName"))
        if "sysprep" in vol:
            sysprep = vol["sysprep"] or {}
            maps.add(_name(sysprep.get("configMap"), "name"))
            secrets.add(_name(sysprep.get("secret"), "name"))
        for kind in CLOUD_INIT:
            src = vol.get(kind)
            if isinstance(src, dict):
                secrets.update(_name(src.get(k), "name") for k in CLOUD_INIT_REFS if k in src)
    for cred in tspec.get("accessCredentials") or ():
        if isinstance(cred, dict):
            source = (cred.get("sshPublicKey") or {}).get("source") or {}
            if isinstance(source, dict):
                secrets.add(_name(source.get("secret"), "secretName"))
    return Names(sorted(n for n in maps if n), sorted(n for n in secrets if n))


def _block(obj: Manifest, field: str, catalog: Catalog) -> dict[Any, Any]:
    """One ``data`` / ``stringData`` / ``binaryData`` block: a mapping of file-name keys."""
    block = obj.obj.get(field)
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise manifest_error(obj, f"{obj.kind} {obj.name}: {field} must be a mapping", (field,), catalog.read)
    for key in block:
        if not is_config_key(key):
            raise manifest_error(
                obj,
                f"{obj.kind} {obj.name}: key {str(key)[:64]!r} of {field} is no file name ({CONFIG_KEY_FORM})",
                (field, str(key)),
                catalog.read,
            )
    return block


def _base64(obj: Manifest, field: str, key: str, value: str, catalog: Catalog) -> bytes:
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise manifest_error(
            obj, f"{obj.kind} {obj.name}: {field}.{key} is not valid base64", (field, key), catalog.read
        ) from None


def _strings(obj: Manifest, field: str, catalog: Catalog) -> dict[str, str]:
    """A block whose values must be strings (as Kubernetes has them; ``1`` or ``null`` is refused)."""
    out: dict[str, str] = {}
    for key, value in _block(obj, field, catalog).items():
        if not isinstance(value, str):
            raise manifest_error(
                obj,
                f"{obj.kind} {obj.name}: {field}.{key} must be a string (quote it)",
                (field, key),
                catalog.read,
            )
        out[key] = value
    return out


def config_maps(
    named: Names, catalog: Catalog, namespace: str
) -> tuple[tuple[str, tuple[tuple[str, str, bool], ...]], ...]:
    """The build's ConfigMaps the VM's volumes name (``configMap``, ``sysprep``)."""
    out = []
    for name in named.config_maps:
        cm = catalog.get("ConfigMap", namespace, name)
        if cm is None:
            continue
        data = _strings(cm, "data", catalog)
        binary = _strings(cm, "binaryData", catalog)
        for key, value in binary.items():
            if key in data:
                raise manifest_error(
                    cm,
                    f"ConfigMap {cm.name}: key {key} is in both data and binaryData",
                    ("binaryData", key),
                    catalog.read,
                )
            _base64(cm, "binaryData", key, value, catalog)
        entries = [(k, v, False) for k, v in sorted(data.items())]
        entries += [(k, v, True) for k, v in sorted(binary.items())]
        out.append((name, tuple(entries)))
    return tuple(out)


def _secret_values(secret: Manifest, catalog: Catalog) -> tuple[tuple[str, bytes], ...]:
    """A Secret's keys as a mounted Secret holds them: ``data`` decoded, ``stringData`` on top."""
    values: dict[str, bytes] = {}
    for field in ("data", "stringData"):
        for key, value in _strings(secret, field, catalog).items():
            values[key] = (
                value.encode() if field == "stringData" else _base64(secret, field, key, value, catalog)
            )
    return tuple(sorted(values.items()))


def secrets(named: Names, catalog: Catalog, namespace: str, vm: Manifest | None = None) -> SecretData:
    """The build's Secrets the VM names (see the module doc); the rest is the host's. More
    than ``limits.MAX_SECRETS_PER_VM`` names is an error at the VM's volumes (each Secret
    costs a key derivation: ``SecretData.digest``)."""
    found = {}
    sealed = []
    names = named.secrets
    if len(names) > MAX_SECRETS_PER_VM and vm is not None:
        raise manifest_error(
            vm,
            f"VirtualMachine {vm.name} names {len(names)} Secrets; at most {MAX_SECRETS_PER_VM} are allowed",
            ("spec", "template", "spec", "volumes"),
            catalog.read,
        )
    for name in names:
        secret = catalog.get("Secret", namespace, name)
        if secret is not None:
            found[f"{namespace}/{name}"] = _secret_values(secret, catalog)
            if secret.sealed:
                sealed.append(f"{namespace}/{name}")
    return SecretData(found, sealed, catalog.digests) if found else NO_SECRETS


# kustomize's name hash suffix: ``-`` and ten characters of its alphabet (overlays.generators)
_HASH_SUFFIX = "-[24-9bcdfghkmt]{10}"


def hashed_names(named: Names, catalog: Catalog, namespace: str) -> tuple[tuple[str, str, str], ...]:
    """Names the spec refers to that the build lacks, but holds with a generator's hash
    suffix (a configMapGenerator or secretGenerator whose references in KubeVirt's fields
    kustomize does not rewrite): (kind, name, generated name)."""
    out = []
    for kind, names in (("ConfigMap", named.config_maps), ("Secret", named.secrets)):
        for name in names:
            if catalog.get(kind, namespace, name) is not None:
                continue
            pattern = re.compile(re.escape(name) + _HASH_SUFFIX)
            generated = sorted(m.name for m in catalog.of_kind(kind, namespace) if pattern.fullmatch(m.name))
            if generated:
                out.append((kind, name, generated[0]))
    return tuple(out)
