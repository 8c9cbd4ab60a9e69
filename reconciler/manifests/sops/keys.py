"""The key material a build decrypts SOPS files with, and the opening of a file's data key.

Input: the text of an age key file (``age-keygen``'s format) and, optionally, a
function that opens an armored PGP message (the caller runs gpg); a file's ``sops``
metadata. Output: ``Keys`` (or ``SEALED``, no keys at all) and, from the metadata, the
file's 32-byte data key, opened by the first of its recipients these keys hold; a
``Problem`` naming the recipients wanted and held (public keys only) when none opens it.

Never reads a file, the environment or gpg's keyring itself; ``pyrage`` is imported
here (lazily: a build without encrypted files never loads it) and in no other module
but through ``load_pyrage()``. Key material is never shown, pickled or put in a message.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from reconciler.errors import ManifestError
from reconciler.manifests.sops import Problem

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def load_pyrage() -> Any:
    """pyrage, imported when a key or a recipient is first needed (not by a build
    without encrypted files: a command's start stays as fast)."""
    import pyrage

    return pyrage


class Keys:
    """The key material a build decrypts with; never shown, never serialised.

    ``age``: identities (``AGE-SECRET-KEY-1…``) from the host's key file; ``pgp``: a
    function opening an armored PGP message (the caller runs gpg), or None; ``sealed``:
    no keys at all, encrypted values read as stand-ins (``SEALED``). ``token`` differs
    per instance: caches that hold what a build decrypted key by it, so other keys (a
    reloaded key file) never reuse them.
    """

    __slots__ = ("_age", "_pgp", "sealed", "token")

    def __init__(
        self,
        age: Sequence[Any] = (),
        pgp: Callable[[str], bytes] | None = None,
        sealed: bool = False,
    ) -> None:
        self._age = tuple(age)
        self._pgp = pgp
        self.sealed = sealed
        self.token = "sealed" if sealed else "keys-" + os.urandom(8).hex()

    @classmethod
    def from_age_keys(cls, text: str, source: str, pgp: Callable[[str], bytes] | None = None) -> Keys:
        """Keys from the text of an age key file (``age-keygen``'s format: comments and
        one ``AGE-SECRET-KEY-1…`` per line). A bad line is an error naming the file and
        the line, never its text."""
        pyrage = load_pyrage()
        identities = []
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if not line.startswith("AGE-SECRET-KEY-1"):
                raise ManifestError("not an age identity (AGE-SECRET-KEY-1…)", source, n, 1)
            try:
                identities.append(pyrage.x25519.Identity.from_str(line))
            except pyrage.IdentityError as err:
                raise ManifestError("not a valid age identity", source, n, 1) from err
        if not identities:
            raise ManifestError("no age identity (AGE-SECRET-KEY-1…) in the key file", source, 1, 1)
        return cls(identities, pgp)

    @property
    def recipients(self) -> tuple[str, ...]:
        """The public keys (``age1…``) of the age identities."""
        return tuple(str(i.to_public()) for i in self._age)

    def data_key(self, meta: dict[str, Any]) -> bytes:
        """The file's data key, opened by the first of its recipients these keys hold
        (age first, then PGP, as sops tries them)."""
        groups = meta.get("key_groups")
        if groups:
            if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict):
                raise Problem(
                    "several key groups (Shamir secret sharing) are not supported: encrypt with one",
                    ("sops", "key_groups"),
                )
            meta = groups[0]
        pyrage = load_pyrage()
        ages = _entries(meta, "age", ("recipient", "enc"))
        pgps = _entries(meta, "pgp", ("fp", "enc"))
        if not ages and not pgps:
            raise Problem("no age or PGP recipient in the file's sops metadata", ("sops",))
        for _recipient, enc in ages:
            if not self._age:
                break
            try:
                key = pyrage.decrypt(enc.encode(), list(self._age))
            except (pyrage.DecryptError, ValueError, TypeError):
                continue
            return _checked_key(key, ("sops", "age"))
        if self._pgp is not None:
            for _fp, enc in pgps:
                try:
                    key = self._pgp(enc)
                except (OSError, ValueError):
                    continue
                return _checked_key(key, ("sops", "pgp"))
        wanted = [_short(r) for r, _ in ages] + [f"PGP {fp}" for fp, _ in pgps]
        held = ", ".join(_short(r) for r in self.recipients) or "none"
        via = " or its PGP keyring" if self._pgp is not None else ""
        raise Problem(
            f"none of the host's keys opens this file: it is encrypted for {', '.join(wanted)}; "
            f"the host's age identities are for {held}{via}",
            ("sops",),
        )

    def __repr__(self) -> str:
        if self.sealed:
            return "Keys(sealed)"
        return f"Keys({len(self._age)} age identities{', pgp' if self._pgp else ''}; redacted)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("Keys are not serialised: key material never leaves the process")


SEALED = Keys(sealed=True)


def _entries(meta: dict[str, Any], kind: str, fields: tuple[str, str]) -> list[tuple[str, str]]:
    raw = meta.get(kind)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise Problem(f"sops.{kind} must be a list", ("sops", kind))
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not all(isinstance(entry.get(f), str) for f in fields):
            raise Problem(f"sops.{kind}[{i}] needs {fields[0]} and {fields[1]}", ("sops", kind, i))
        out.append((str(entry[fields[0]]), str(entry[fields[1]])))
    return out


def _short(recipient: str) -> str:
    return recipient if len(recipient) <= 70 else recipient[:24] + "…" + recipient[-8:]


def _checked_key(key: bytes, field: tuple[str | int, ...]) -> bytes:
    if len(key) != 32:
        raise Problem("the file's data key is not 32 bytes", field)
    return key
