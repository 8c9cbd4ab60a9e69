"""The prober's readiness snapshot: every VM's ``Readiness``, by host, as one frozen mapping.

Input: each host's mapping of its VMs' readiness (``dict[VMKey, Readiness]``, in the order
the prober first saw them), never changed once handed over (the prober replaces a host's
as a whole). Output: ``Snapshot``, a read-only ``Mapping[VMKey, Readiness]`` over them
(a VM is on one host), and ``by_host()`` for what is shown by host (the metric
``reconciler_vm_ready``). It holds no record per VM of its own: the hosts' mappings are the
only table of the VMs the prober keeps for those without probes (``prober.py``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar, overload

if TYPE_CHECKING:
    from collections.abc import Iterator

    from reconciler.model.health import Readiness
    from reconciler.model.keys import VMKey

_T = TypeVar("_T")


class Snapshot(Mapping["VMKey", "Readiness"]):
    """Every VM's readiness: the hosts' mappings, searched in turn (a handful of hosts)."""

    __slots__ = ("_hosts",)

    def __init__(self, hosts: tuple[tuple[str, Mapping[VMKey, Readiness]], ...] = ()) -> None:
        self._hosts = hosts

    def by_host(self) -> tuple[tuple[str, Mapping[VMKey, Readiness]], ...]:
        """Each host and its VMs' readiness (frozen: safe to read from any thread)."""
        return self._hosts

    def __getitem__(self, key: VMKey) -> Readiness:
        for _, ready in self._hosts:
            r = ready.get(key)
            if r is not None:
                return r
        raise KeyError(key)

    @overload
    def get(self, key: VMKey, /) -> Readiness | None: ...

    @overload
    def get(self, key: VMKey, /, default: Readiness | _T) -> Readiness | _T: ...

    def get(self, key: VMKey, /, default: Readiness | _T | None = None) -> Readiness | _T | None:
        for _, ready in self._hosts:
            r = ready.get(key)
            if r is not None:
                return r
        return default

    def __contains__(self, key: object) -> bool:
        return any(key in ready for _, ready in self._hosts)

    def __iter__(self) -> Iterator[VMKey]:
        for _, ready in self._hosts:
            yield from ready

    def __len__(self) -> int:
        return sum(len(ready) for _, ready in self._hosts)
