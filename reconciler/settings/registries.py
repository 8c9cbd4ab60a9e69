"""How a host reaches registries, as a record (``config.registries`` reads it from the
``registries:`` section of a host configuration).

- ``insecure``: ``HOST[:PORT]`` registries reached over plain HTTP or with unverified
  TLS; the only way to turn verification off (every other registry is TLS-verified).
- ``mirrors``: a registry host -> the registries tried before it, in order (the same
  repository path and tag or digest); the registry itself is tried last.
- ``auth_file``: a containers-auth.json (or docker ``config.json``) file on the host,
  used when a VM names no ``imagePullSecret``.
"""

from __future__ import annotations

from dataclasses import field
from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Mapping

# A registry host: a DNS name or an IPv4 address, with an optional port (no scheme, no path).
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")


def is_registry_host(text: str) -> bool:
    """Whether ``text`` is ``host`` or ``host:port`` (lower case, no scheme or path)."""
    host, sep, port = text.partition(":")
    if not host or not set(host) <= _HOST_CHARS or host.startswith(("-", ".")) or host.endswith("-"):
        return False
    return not sep or (port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536)


@dataclass(frozen=True, slots=True)
class Registries:
    """How this host pulls from registries (see the module doc)."""

    insecure: tuple[str, ...] = ()
    mirrors: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    auth_file: str = ""  # "" = none

    def __post_init__(self) -> None:
        if not isinstance(self.mirrors, MappingProxyType):
            object.__setattr__(self, "mirrors", MappingProxyType(dict(self.mirrors)))

    def verifies(self, host: str) -> bool:
        """Whether TLS is verified for ``host`` (``HOST[:PORT]``): always, unless listed."""
        return host not in self.insecure
