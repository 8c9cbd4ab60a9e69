"""A VM's identity: its namespace and name, and everything derived from them.

Input: a namespace and a name (or a libvirt domain name). Output: ``VMKey``. Pure.
Every stage pairs by key: the expanded VM, the rendered domain, the change, the status
row and a problem carry the same ``VMKey``; nobody builds a domain name or a
``vm/<name>`` subject by hand.

- the libvirt domain name is the VM's name in namespace ``default`` and
  ``<namespace>_<name>`` in any other (DESIGN §2). A namespace is a DNS-1123 label and a
  name a DNS-1123 subdomain, so neither holds ``_`` and the mapping is one to one;
- the subject, in logs, errors and plan lines, is ``vm/<domain name>``.
"""

from __future__ import annotations

DEFAULT_NAMESPACE = "default"


class VMKey(tuple[str, str]):
    """(namespace, name) of a VirtualMachine; ``""`` as namespace means ``default``.

    A tuple underneath: stages pair thousands of VMs by key on every plan, and a tuple
    hashes and compares as fast as the strings it holds; ordered by namespace, then name.
    """

    __slots__ = ()

    def __new__(cls, namespace: str, name: str) -> VMKey:
        return tuple.__new__(cls, (namespace or DEFAULT_NAMESPACE, name))

    def __getnewargs__(self) -> tuple[str, str]:
        return (self[0], self[1])

    @property
    def namespace(self) -> str:
        return self[0]

    @property
    def name(self) -> str:
        return self[1]

    @property
    def domain(self) -> str:
        """The libvirt domain name."""
        return self[1] if self[0] == DEFAULT_NAMESPACE else f"{self[0]}_{self[1]}"

    @property
    def subject(self) -> str:
        """``vm/<domain name>``: how logs, errors and plans name the VM."""
        return f"vm/{self.domain}"

    @classmethod
    def from_domain(cls, domain: str) -> VMKey:
        """The key a libvirt domain name stands for (the inverse of ``domain``:
        ``VMKey.from_domain(d).domain == d`` for every ``d``).

        A domain the reconciler did not name (``my_old_vm``) still maps to a key, split at
        its first ``_``; such a key matches no VM of git, since no VM name holds ``_``.
        A name that does not split into two non-empty parts, or whose first part is
        ``default`` (whose VMs are named without a prefix), is a name in ``default``."""
        namespace, sep, name = domain.partition("_")
        if sep and namespace and name and namespace != DEFAULT_NAMESPACE:
            return tuple.__new__(cls, (namespace, name))
        return tuple.__new__(cls, (DEFAULT_NAMESPACE, domain))

    def __repr__(self) -> str:
        return f"VMKey(namespace={self[0]!r}, name={self[1]!r})"

    def __str__(self) -> str:
        return self.subject
