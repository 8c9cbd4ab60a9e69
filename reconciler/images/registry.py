"""containerDisks from OCI/Docker registries: a reference resolved to a digest, pulled, checked.

Input: an image reference (``quay.io/containerdisks/fedora:40``, ``HOST:PORT/disks/tiny@sha256:...``;
a DataVolume's ``docker://`` URL without the scheme), the host's ``Registries``
(insecure hosts, mirrors, auth file), the pull's credentials (``PullAuth``), the store's
byte budget. Output: ``Resolved`` (the reference and the digest of its linux/amd64 image
manifest) and ``ContainerDisk`` (its ``/disk/`` file in a directory the caller owns).
I/O through ``skopeo`` only (``images.skopeo``); the checks are ``images.manifest`` and
``images.containerdisk``.

- **Resolve** (``RegistryResolver.resolve``): ``skopeo inspect --raw`` of the tag (or the
  digest) at each mirror of the registry in order, then at the registry itself; the first
  that answers decides. A manifest list yields its linux/amd64 image (none: refused), whose
  manifest is read by digest and checked against it. Its declared size (config and layers)
  over the budget is refused here, before anything is downloaded.
- **Fetch** (``fetch``): ``skopeo copy --preserve-digests docker://REPO@DIGEST dir:TMP`` from
  the same places in the same order, then the manifest and every blob are checked against
  the digest and the disk file extracted (``containerdisk.extract_disk``), handed over as
  ``<first 16 hex of the digest>-<its name>``; a check that fails is a refusal, and
  nothing is used (the pull's temporary directory goes with it).
- TLS is verified for every registry but those of ``registries.insecure``.
- Errors are ``RegistryError``s naming the subject (``vm/<name>``), the image and the
  reason; a failure of the network or the registry is transient, a refusal is not.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import structlog

from reconciler.images.containerdisk import ContainerDisk, ContractError, extract_disk
from reconciler.images.manifest import image_manifest, is_list, manifest_digest, platform_digest
from reconciler.images.reference import Reference, RegistryError, parse_reference
from reconciler.images.skopeo import PullAuth, Skopeo, SkopeoError
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.settings.registries import Registries

log = structlog.get_logger("reconciler.images")

DEFAULT_BUDGET = 20 << 30  # bytes; the store's budget when the caller names none
_HINTS = MappingProxyType(
    {
        "tls": "its TLS certificate is not trusted; list {host} under registries.insecure "
        "in the host config to pull from it without verification",
        "http": "it answers in plain HTTP; list {host} under registries.insecure in the host config to allow it",
        "auth": "the registry refused the credentials ({origin}); name an imagePullSecret "
        "(a kubernetes.io/dockerconfigjson Secret) or set registries.authFile",
        "missing": "the registry has no such image",
        "digest": "the registry served bytes that do not match their digest, and nothing is used",
    }
)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A reference and the digest of the linux/amd64 image manifest it names."""

    reference: Reference
    digest: str  # "sha256:<hex>" of the image manifest
    registry: str  # where it was resolved (a mirror or the reference's registry)
    declared_size: int  # config and layers, as the manifest declares them

    @property
    def image(self) -> str:
        """The reference as the plan shows it: ``registry/repo:tag``."""
        return self.reference.text


class RegistryResolver:
    """Resolves and fetches containerDisks for one host (see the module doc)."""

    def __init__(
        self,
        registries: Registries,
        max_bytes: int = DEFAULT_BUDGET,
        skopeo: Skopeo | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registries = registries
        self.max_bytes = max_bytes
        self.skopeo = skopeo or Skopeo()
        self.clock = clock

    def places(self, ref: Reference) -> tuple[str, ...]:
        """Where ``ref`` is looked for, in order: its mirrors, then its registry."""
        return (*self.registries.mirrors.get(ref.registry, ()), ref.registry)

    def _tried(
        self, ref: Reference, subject: str, what: str, call: Callable[[str], object], auth: PullAuth
    ) -> str:
        """The first place where ``call(place)`` succeeds; the registry's own failure
        (mirrors failing first are named) as a ``RegistryError`` otherwise."""
        failures: list[str] = []
        places = self.places(ref)
        for place in places:
            try:
                call(place)
            except SkopeoError as err:
                if place != ref.registry:
                    log.warning(
                        "image mirror failed", subject=subject, image=ref.text, mirror=place, reason=str(err)
                    )
                    failures.append(place)
                    continue
                hint = _HINTS.get(err.kind, "").format(host=place, origin=auth.origin or "no credentials")
                mirrors = f" (mirrors {', '.join(failures)} failed too)" if failures else ""
                raise RegistryError(
                    f"{what} from {place} failed: {hint + ': ' if hint else ''}{err}{mirrors}",
                    ref.text,
                    subject,
                    transient=err.kind in ("timeout", "other"),
                ) from err
            return place
        raise AssertionError("unreachable: the registry is always the last place")

    def resolve(self, image: str, auth: PullAuth, subject: str = "") -> Resolved:
        """The digest ``image`` names now (a digest reference is checked, not re-resolved)."""
        ref = self.reference(image, subject)
        found: dict[str, tuple[bytes, str]] = {}

        def inspect(place: str) -> None:
            name = ref.at(place)
            raw = self.skopeo.inspect_raw(name, self.registries.verifies(place), auth)
            found["raw"] = (raw, manifest_digest(raw))

        started = self.clock()
        place = self._tried(ref, subject, "resolving", inspect, auth)
        raw, digest = found["raw"]
        if ref.digest and digest != ref.digest:
            raise RegistryError(f"{place} served a manifest of digest {digest}", ref.text, subject)
        try:
            if is_list(raw):
                digest = platform_digest(raw)
                raw = self.skopeo.inspect_raw(
                    ref.pinned(place, digest), self.registries.verifies(place), auth
                )
                if manifest_digest(raw) != digest:
                    raise RegistryError(f"the linux/amd64 manifest served is not {digest}", ref.text, subject)
            manifest = image_manifest(raw)
        except ValueError as err:
            raise RegistryError(str(err), ref.text, subject) from err
        except SkopeoError as err:
            raise RegistryError(f"reading its linux/amd64 manifest failed: {err}", ref.text, subject) from err
        if manifest.declared_size > self.max_bytes:
            raise RegistryError(
                f"its layers declare {manifest.declared_size} bytes, "
                f"over the image store's budget of {self.max_bytes}",
                ref.text,
                subject,
            )
        log.info(
            "image resolved",
            subject=subject,
            image=ref.text,
            digest=digest,
            registry=place,
            duration_ms=int((self.clock() - started) * 1000),
        )
        return Resolved(ref, digest, place, manifest.declared_size)

    def fetch(self, resolved: Resolved, out_dir: Path, auth: PullAuth, subject: str = "") -> ContainerDisk:
        """The disk file of ``resolved``, pulled by digest, checked and written into ``out_dir``."""
        ref = resolved.reference
        started = self.clock()
        with tempfile.TemporaryDirectory(prefix="reconciler-pull-", dir=out_dir) as tmp:
            layout = Path(tmp) / "layout"

            log.info(
                "image pull started",
                subject=subject,
                image=ref.text,
                digest=resolved.digest,
                bytes=resolved.declared_size,
            )

            def copy(place: str) -> None:
                if layout.exists():
                    _empty(layout)
                self.skopeo.copy_to_dir(
                    ref.pinned(place, resolved.digest), layout, self.registries.verifies(place), auth
                )

            place = self._tried(ref, subject, "pulling", copy, auth)
            try:
                unpacked = extract_disk(layout, resolved.digest, Path(tmp), self.max_bytes)
                # named by its digest: pulls of other images into the same directory never meet
                final = out_dir / f"{resolved.digest.removeprefix('sha256:')[:16]}-{unpacked.path.name}"
                unpacked.path.replace(final)
                disk = dataclasses.replace(unpacked, path=final)
            except ContractError as err:
                raise RegistryError(f"refused: {err}", f"{ref.text}@{resolved.digest}", subject) from err
            except OSError as err:
                raise RegistryError(
                    f"unpacking failed: {err.strerror or err}", ref.text, subject, transient=True
                ) from err
        log.info(
            "image pulled",
            subject=subject,
            image=ref.text,
            digest=resolved.digest,
            registry=place,
            bytes=disk.size,
            duration_ms=int((self.clock() - started) * 1000),
        )
        return disk

    @staticmethod
    def reference(image: str, subject: str = "") -> Reference:
        try:
            return parse_reference(image.removeprefix("docker://"))
        except ValueError as err:
            raise RegistryError(str(err), repr(image), subject) from err


def _empty(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


__all__: list[str] = ["DEFAULT_BUDGET", "RegistryResolver", "Resolved"]
