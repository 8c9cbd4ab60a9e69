"""The values of Secrets a build produced, held so they cannot be shown.

Input: ``namespace/name`` -> ((key, bytes), ...), and which of them were read sealed
(SOPS files without the keys: stand-ins, not values). Output: a ``SecretData`` whose
``repr``/``str`` name the Secrets only, which is no JSON value and cannot be pickled (unless empty),
and whose equality goes by content digest. Pure; imports nothing of the project.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


ROUNDS = 200_000  # PBKDF2-HMAC-SHA256 rounds of a Secret's digest (about 0.1 s, once per process)
_DIGESTS: dict[bytes, str] = {}  # by a digest of the content (memory only): each derived once


class SecretData:
    """Values of the build's Secrets, by ``namespace/name``: ((key, bytes), ...) each.

    Carried from the expansion to the host's ISO builder beside the rendered payload
    (which names the Secret and its ``digest`` only). Never shown: ``repr``/``str``
    give the names alone, it is no JSON value, and equality and hashing go by digest.
    """

    __slots__ = ("_sealed", "_values")

    def __init__(
        self,
        values: Mapping[str, tuple[tuple[str, bytes], ...]] | None = None,
        sealed: Iterable[str] = (),
    ) -> None:
        self._values = {k: tuple(sorted(v)) for k, v in sorted((values or {}).items())}
        self._sealed = frozenset(r for r in sealed if r in self._values)

    def names(self) -> tuple[str, ...]:
        return tuple(self._values)

    def sealed(self, ref: str) -> bool:
        """Whether this Secret was read from SOPS files without the keys: its values are
        stand-ins for its ciphertext (a change shows, what changed does not)."""
        return ref in self._sealed

    def get(self, ref: str) -> tuple[tuple[str, bytes], ...] | None:
        return self._values.get(ref)

    def digest(self, ref: str) -> str:
        """``pbkdf2-sha256:<hex>`` of one Secret's keys and values (stable, order-free).

        The digest stands in the payload, the plan's comparison and the domain's metadata,
        where whoever can read a domain's XML reads it too: a slow, salted derivation (the
        salt is the Secret's name) makes guessing a short Secret from it impractical, where
        a plain sha256 would not. Computed once per process for a given content."""
        h = hashlib.sha256()
        for key, value in self._values[ref]:
            h.update(f"{len(key)}:{key}:{len(value)}:".encode())
            h.update(value)
        material = h.digest()
        cache_key = hashlib.blake2b(material + ref.encode(), digest_size=16).digest()
        got = _DIGESTS.get(cache_key)
        if got is None:
            derived = hashlib.pbkdf2_hmac("sha256", material, f"reconciler.secret/{ref}".encode(), ROUNDS)
            if len(_DIGESTS) >= 1024:
                _DIGESTS.clear()
            got = _DIGESTS[cache_key] = "pbkdf2-sha256:" + derived.hex()
        return got

    def subset(self, refs: Iterable[str]) -> SecretData:
        return SecretData({r: self._values[r] for r in refs if r in self._values}, self._sealed)

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
