"""Image references, as the container runtime reads them (a containerDisk ``image``, a
DataVolume ``registry.url`` without its ``docker://``): ``parse_reference`` gives the
registry host, repository, tag and digest, or says why a text is none. Pure; render
checks a reference with it, ``images`` resolves and pulls what it names.

Names are normalized as docker's ``reference`` package does: a first component with
a ``.`` or a ``:`` (or ``localhost``) is the registry, else the registry is
``docker.io`` and a one-component repository is under ``library/``; no tag means
``latest``. A reference by digest (``@sha256:<64 hex>``) is never resolved again.
"""

from __future__ import annotations

import string

from reconciler.records import dataclass

DOCKER_HUB = "docker.io"
_PATH_CHARS = frozenset(string.ascii_lowercase + string.digits + "._-/")
_TAG_CHARS = frozenset(string.ascii_letters + string.digits + "._-")
_HEX = frozenset("0123456789abcdef")
MAX_REFERENCE = 255 + 128 + 72  # a repository name, a tag and a digest, as distribution bounds them


@dataclass(frozen=True, slots=True)
class Reference:
    """A parsed image reference; ``registry`` is ``HOST[:PORT]``."""

    registry: str
    repository: str
    tag: str = ""  # "" when only a digest was given
    digest: str = ""  # "sha256:<hex>" when given

    @property
    def text(self) -> str:
        """The normalized reference: ``registry/repository[:tag][@digest]``."""
        tail = (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")
        return f"{self.registry}/{self.repository}{tail}"

    def at(self, registry: str) -> str:
        """``docker://`` name of this tag or digest in another registry (a mirror)."""
        tail = f"@{self.digest}" if self.digest else f":{self.tag}"
        return f"docker://{registry}/{self.repository}{tail}"

    def pinned(self, registry: str, digest: str) -> str:
        """``docker://`` name of one digest of this repository in ``registry``."""
        return f"docker://{registry}/{self.repository}@{digest}"


def is_digest(text: str) -> bool:
    algo, _, hexpart = text.partition(":")
    return algo == "sha256" and len(hexpart) == 64 and set(hexpart) <= _HEX


def parse_reference(text: str) -> Reference:
    """``text`` as the runtime reads an image name; ``ValueError`` says why it is none."""
    if not text or len(text) > MAX_REFERENCE or text != text.strip():
        raise ValueError("not an image reference (registry/repository:tag or @sha256:...)")
    rest, _, digest = text.partition("@")
    if digest and not is_digest(digest):
        raise ValueError("the digest after '@' must be sha256: and 64 lower-case hex digits")
    first, slash, _ = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, rest = first, rest[len(first) + 1 :]
    else:
        registry = DOCKER_HUB
    name, colon, tag = rest.rpartition(":") if ":" in rest else (rest, "", "")
    if colon and (not tag or not set(tag) <= _TAG_CHARS or len(tag) > 128 or tag[0] in ".-"):
        raise ValueError("a tag is at most 128 letters, digits, '.', '_' or '-'")
    if not name or not set(name) <= _PATH_CHARS or "//" in name or name[0] in "/._-" or name[-1] in "/._-":
        raise ValueError("a repository is lower-case letters, digits and '.', '_', '-' between '/'")
    if registry == DOCKER_HUB and "/" not in name:
        name = f"library/{name}"
    registry_host = registry.partition(":")[0]
    if not registry_host or registry_host != registry_host.lower():
        raise ValueError("the registry host must be lower case")
    return Reference(registry, name, tag if colon else ("" if digest else "latest"), digest)


__all__: list[str] = ["DOCKER_HUB", "MAX_REFERENCE", "Reference", "is_digest", "parse_reference"]
