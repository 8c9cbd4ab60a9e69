"""The registry as a source of the image store: containerDisk images and DataVolume
``registry`` URLs (a ``sources.Resolver``).

Input: an ``ImageRef`` (``containerDisk`` or ``registry``: the image, ``docker://`` or
not), the credentials ``resolve.auth_for`` read (a ``.dockerconfigjson`` from the VM's
``imagePullSecret``, or a DataVolume's ``secretRef`` user and key; none: the host's
``registries.authFile``; a DataVolume's ``certConfigMap``: CAs trusted besides the system's), the host's ``Registries`` and the store's room. Output: a
``sources.Resolved`` (the linux/amd64 manifest digest, the declared size, the reference
by digest) and, on ``fetch``, the ``/disk/`` file pulled by that digest, checked
(``registry.RegistryResolver``). A reference by digest is never resolved again: its
manifest is read by digest when it is fetched. Errors are ``ImageError``s with the reason
alone (the caller names the VM and the image).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import field
from typing import TYPE_CHECKING

from reconciler.images import registry
from reconciler.images.reference import Reference, RegistryError
from reconciler.images.skopeo import PullAuth, Skopeo, dockerconfigjson
from reconciler.images.sources import Auth, ImageError, ImageRef, PullPolicy, Resolved
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from reconciler.settings.registries import Registries


def _reference(image: str) -> Reference:
    try:
        return registry.RegistryResolver.reference(image)
    except RegistryError as err:
        raise ImageError(err.reason, transient=err.transient) from None


@dataclass(frozen=True, slots=True)
class RegistrySource:
    """containerDisk and ``registry`` references, pulled with skopeo (see the module doc)."""

    registries: Registries
    room: Callable[[], int]  # bytes the store may still take
    skopeo: Skopeo = field(default_factory=Skopeo)
    on_bytes: Callable[[int], None] = field(default=lambda n: None)  # bytes pulled (the metric)

    def _resolver(self) -> registry.RegistryResolver:
        return registry.RegistryResolver(self.registries, self.room(), self.skopeo)

    def pull_auth(self, auth: Auth | None, ref: Reference) -> PullAuth:
        """The credentials of one pull, as skopeo takes them (see the module doc)."""
        ca = auth.ca_bundle if auth is not None else ""
        if auth is not None and auth.config_json:
            try:
                got = dockerconfigjson(auth.config_json.encode(), "imagePullSecret")
            except ValueError as err:
                raise ImageError(str(err)) from None
            return dataclasses.replace(got, ca_bundle=ca)
        if auth is not None and (auth.username or auth.password):
            token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
            doc = json.dumps({"auths": {ref.registry: {"auth": token}}}).encode()
            return PullAuth(config_json=doc, origin="secretRef", ca_bundle=ca)
        if auth is not None and auth.auth_file:
            return PullAuth(auth_file=auth.auth_file, origin="auth file", ca_bundle=ca)
        if self.registries.auth_file:
            return PullAuth(auth_file=self.registries.auth_file, origin="registries.authFile", ca_bundle=ca)
        return PullAuth(ca_bundle=ca)

    def resolve(self, ref: ImageRef, policy: PullPolicy, auth: Auth | None) -> Resolved:
        parsed = _reference(ref.ref)
        if parsed.digest:  # never resolved again
            pinned = f"{parsed.registry}/{parsed.repository}@{parsed.digest}"
            return Resolved(ref.ref, ref.kind, parsed.digest, pinned=pinned)
        try:
            got = self._resolver().resolve(ref.ref, self.pull_auth(auth, parsed))
        except RegistryError as err:
            raise ImageError(err.reason, transient=err.transient) from None
        pinned = f"{parsed.registry}/{parsed.repository}@{got.digest}"
        return Resolved(ref.ref, ref.kind, got.digest, size=got.declared_size, pinned=pinned)

    def fetch(self, resolved: Resolved, dest_dir: Path, auth: Auth | None) -> Path:
        parsed = _reference(resolved.ref)
        resolver = self._resolver()
        pull = self.pull_auth(auth, parsed)
        try:
            if resolved.size is None:  # by digest: its manifest read (by digest) and its size checked
                got = resolver.resolve(resolved.pinned or resolved.ref, pull)
            else:
                got = registry.Resolved(parsed, resolved.digest, parsed.registry, resolved.size)
            path = resolver.fetch(got, dest_dir, pull).path
        except RegistryError as err:
            raise ImageError(err.reason, transient=err.transient) from None
        self.on_bytes(got.declared_size)  # what the registry sent: config and layers
        return path


__all__: list[str] = ["RegistrySource"]
