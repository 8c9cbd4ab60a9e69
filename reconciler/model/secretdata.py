"""The values of Secrets a build produced, held so they cannot be shown.

Input: ``namespace/name`` -> ((key, bytes), ...), which of them were read sealed
(SOPS files without the keys: stand-ins, not values), and where to keep the digests (the
catalog cache's store, by content). Output: a ``SecretData`` whose
``repr``/``str`` name the Secrets only, which is no JSON value and cannot be pickled (unless empty),
and whose equality goes by content digest. Pure; imports nothing of the project.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


# A Secret's digest is scrypt's (memory-hard: each guess at a value costs 512 KiB and about
# a millisecond, on a GPU as on a CPU), salted with the Secret's name: about 1 ms per
# Secret, so the 4096 Secrets a revision may hold are digested in seconds. (PBKDF2 with
# 200,000 rounds, before, cost 0.1 s each: 7 minutes at the budget, and a GPU guesses
# PBKDF2 far faster than scrypt for the same CPU time.)
SCRYPT_N = 1024
SCRYPT_R = 4
SCRYPT_P = 1
SCHEME = "scrypt"  # the digests' prefix; a payload naming them is marked by it (render/configdisk)


class DigestStore(Protocol):
    """Where digests are kept by a digest of their content (``context.RevisionCache``)."""

    def get(self, key: bytes) -> str | None: ...
    def put(self, key: bytes, value: str) -> None: ...


class SecretData:
    """Values of the build's Secrets, by ``namespace/name``: ((key, bytes), ...) each.

    Carried from the expansion to the host's ISO builder beside the rendered payload
    (which names the Secret and its ``digest`` only). Never shown: ``repr``/``str``
    give the names alone, it is no JSON value, and equality and hashing go by digest.
    """

    __slots__ = ("_known", "_sealed", "_store", "_values")

    def __init__(
        self,
        values: Mapping[str, tuple[tuple[str, bytes], ...]] | None = None,
        sealed: Iterable[str] = (),
        store: DigestStore | None = None,
    ) -> None:
        self._values = {k: tuple(sorted(v)) for k, v in sorted((values or {}).items())}
        self._sealed = frozenset(r for r in sealed if r in self._values)
        self._store = store  # digests shared by content (the catalog cache's), if any
        self._known: dict[str, str] = {}  # this object's digests, by name

    def names(self) -> tuple[str, ...]:
        return tuple(self._values)

    def sealed(self, ref: str) -> bool:
        """Whether this Secret was read from SOPS files without the keys: its values are
        stand-ins for its ciphertext (a change shows, what changed does not)."""
        return ref in self._sealed

    def get(self, ref: str) -> tuple[tuple[str, bytes], ...] | None:
        return self._values.get(ref)

    def digest(self, ref: str) -> str:
        """``scrypt:<hex>`` of one Secret's keys and values (stable, order-free).

        The digest stands in the payload, the plan's comparison and the domain's metadata,
        where whoever can read a domain's XML reads it too: a memory-hard, salted
        derivation (the salt is the Secret's name) makes each guess at a short Secret cost
        what it costs us, where a plain sha256 would make it free. Computed once per
        content while the store keeps it."""
        got = self._known.get(ref)
        if got is not None:
            return got
        h = hashlib.sha256()
        for key, value in self._values[ref]:
            h.update(f"{len(key)}:{key}:{len(value)}:".encode())
            h.update(value)
        material = h.digest()
        store_key = hashlib.blake2b(material + ref.encode(), digest_size=16).digest()
        got = self._store.get(store_key) if self._store is not None else None
        if got is None:
            derived = hashlib.scrypt(
                material,
                salt=f"reconciler.secret/{ref}".encode(),
                n=SCRYPT_N,
                r=SCRYPT_R,
                p=SCRYPT_P,
                dklen=32,
            )
            got = f"{SCHEME}:{derived.hex()}"
            if self._store is not None:
                self._store.put(store_key, got)
        self._known[ref] = got
        return got

    def subset(self, refs: Iterable[str]) -> SecretData:
        return SecretData({r: self._values[r] for r in refs if r in self._values}, self._sealed, self._store)

    def __bool__(self) -> bool:
        return bool(self._values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretData):
            return NotImplemented
        return [(r, self.digest(r)) for r in self._values] == [(r, other.digest(r)) for r in other._values]

    def __hash__(self) -> int:
        return hash(tuple((r, self.digest(r)) for r in self._values))

    def __repr__(self) -> str:
        return f"SecretData({', '.join(self._values)}; values redacted)"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict[int, Any]) -> SecretData:
        return self  # immutable

    def __reduce__(self) -> Any:
        if not self._values:
            return (SecretData, ())
        raise TypeError("SecretData is not serialised: Secret values never leave the process")


NO_SECRETS = SecretData()
