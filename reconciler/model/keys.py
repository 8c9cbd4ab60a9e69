"""A VM's identity: its namespace and name, and everything derived from them.

Input: a namespace and a name (or a libvirt domain name). Output: ``VMKey``. Pure.
Every stage pairs by key: the expanded VM, the rendered domain, the change, the status
row and a problem carry the same ``VMKey``; nobody builds a domain name or a
``vm/<name>`` subject by hand. A VirtualMachine's key is made once, where the catalog
reads the VM (``VMKey.checked``: the one check of its name, namespace and domain name,
worded here), and carried from there by expansion, rendering, the plan and status; a
live domain's key is made once, where the host is read (``VMKey.from_domain``).

- the libvirt domain name is the VM's name in namespace ``default`` and
  ``<namespace>_<name>`` in any other (DESIGN §2). A namespace is a DNS-1123 label and a
  name a DNS-1123 subdomain, so neither holds ``_`` and the mapping is one to one;
- the subject, in logs, errors and plan lines, is ``vm/<domain name>``.
"""

from __future__ import annotations

from reconciler.model.identifiers import MAX_DNS_LABEL, MAX_DNS_SUBDOMAIN, is_dns_label, is_dns_subdomain

DEFAULT_NAMESPACE = "default"
# The longest libvirt domain name: the files named after it on the host
# (``<domain>_VARS.fd``, libvirt's ``<domain>.xml`` and ``.log``) stay within the 255-byte
# file-name limit.
MAX_DOMAIN_NAME = 240


def _shown(value: object) -> str:
    """``repr`` of a value that is no name, at most 60 characters (a list of 100k items)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def name_problem(name: object, what: str = "metadata.name") -> str:
    """Why ``name`` is not a DNS-1123 subdomain ("" when it is one)."""
    if not isinstance(name, str):
        return f"{what} must be a string, got {type(name).__name__} {_shown(name)}: quote it in the YAML"
    if len(name) > MAX_DNS_SUBDOMAIN:
        return f"{what} is {len(name)} characters long; at most {MAX_DNS_SUBDOMAIN} are allowed"
    if not is_dns_subdomain(name):
        return (
            f"{what} {name!r} is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit)"
        )
    return ""


def namespace_problem(namespace: object) -> str:
    """Why ``namespace`` is not a DNS-1123 label ("" when it is one, or absent)."""
    if namespace is None:
        return ""
    if not isinstance(namespace, str):
        return f"metadata.namespace must be a string, got {type(namespace).__name__} {_shown(namespace)}"
    if len(namespace) > MAX_DNS_LABEL:
        return f"metadata.namespace is {len(namespace)} characters long; at most {MAX_DNS_LABEL} are allowed"
    if not is_dns_label(namespace):
        return (
            f"metadata.namespace {namespace!r} is not a DNS-1123 label (lower-case letters, digits "
            "and '-', starting and ending with a letter or digit)"
        )
    return ""


class InvalidKey(ValueError):
    """Why a VirtualMachine's name or namespace makes no key: ``field`` (``metadata.name``
    or ``metadata.namespace``), ``message`` (the cause) and whether the message is about
    the named VM (``named``: the namespace, the domain name) or its name itself."""

    def __init__(self, field: str, message: str, named: bool) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.named = named


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
    def checked(cls, namespace: object, name: object) -> VMKey:
        """The key of a VirtualMachine as its YAML names it (``namespace`` as written, None
        when absent): its name a DNS-1123 subdomain, its namespace a DNS-1123 label, as
        the Kubernetes API server requires, and its domain name at most
        ``MAX_DOMAIN_NAME`` characters. Raises ``InvalidKey``."""
        problem = name_problem(name)
        if problem:
            raise InvalidKey("metadata.name", problem, named=False)
        problem = namespace_problem(namespace)
        if problem:
            raise InvalidKey("metadata.namespace", problem, named=True)
        assert isinstance(name, str)
        assert namespace is None or isinstance(namespace, str)
        key = cls(namespace or "", name)
        domain = key.domain
        if len(domain) > MAX_DOMAIN_NAME:
            raise InvalidKey(
                "metadata.name",
                f"the domain name {domain[:40]}... is {len(domain)} characters long; at most "
                f"{MAX_DOMAIN_NAME} fit the host's file names",
                named=True,
            )
        return key

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
