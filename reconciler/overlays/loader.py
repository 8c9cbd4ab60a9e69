"""Reading a build's files: kustomization files found and checked, the plain files they
name (confined to the kustomization's directory), resource files parsed once per
content, SOPS-encrypted files opened with the keys the caller gave.

Input: a ``FileView``, the build's ``OverlayCache``, the ``Keys`` to decrypt with
(None: an encrypted file is an error; ``SEALED``: read without keys) and a mapper
(``context.Mapper``: the resource files a kustomization names are parsed through it,
their bytes read here). Output:
``Kust`` records and ``Res`` records with their file and line; an ``OverlayError`` at
file:line for a file that is missing, outside the directory that names it, or remote,
and for an encrypted file that does not open or verify, or that holds anything but
Secrets (a decrypted value lands in Secrets only, which nothing prints). Pure.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from reconciler.context import SERIAL
from reconciler.errors import ManifestError, OverlayError, ReconcilerError
from reconciler.manifests import (
    clone,
    locate,
    parse_documents,
    parse_objects,
    parse_yaml11,
    parse_yaml_value,
)
from reconciler.manifests.paths import join_path
from reconciler.manifests.positions import Positions
from reconciler.manifests.sops import Problem as SopsProblem
from reconciler.manifests.sops.files import (
    checked_meta,
    encrypted_documents,
    file_format,
    open_documents,
    open_file,
    problem_at,
)
from reconciler.model import Manifest, Problem, Severity
from reconciler.overlays.kustomization import KUSTOMIZATION_FILES, Kust, check_fields, field_names
from reconciler.overlays.resource import Res

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.context import Mapper
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import FileView
    from reconciler.overlays.cache import OverlayCache


NO_KEYS = (
    "encrypted with SOPS, and no decryption key is given (the CLI reads SOPS_AGE_KEY_FILE, "
    "the daemon decryption.ageKeyFile)"
)
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)|\?ref=|//")


def missing_reason(files: FileView, path: str) -> str:
    """Why a resource the view does not hold is missing: what reading it says (a git
    submodule, whose files are another repository's), else "file or directory not found"."""
    try:
        files.read(path)
    except OverlayError as err:
        return err.message
    except (OSError, ReconcilerError):
        pass
    return "file or directory not found"


def within(path: str, directory: str) -> bool:
    return not directory or path == directory or path.startswith(directory + "/")


class Loader:
    """The file side of a build (``Builder`` adds the kustomize semantics)."""

    # The kustomization fields the transformers read, their shapes and types, checked with
    # the loader's own: the engine's ``Builder`` gives those of ``transformers``.
    transformer_fields: ClassVar[frozenset[str]] = frozenset()
    transformer_shapes: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    transformer_types: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    def __init__(
        self, files: FileView, cache: OverlayCache, keys: Keys | None = None, mapper: Mapper = SERIAL
    ) -> None:
        self.files = files
        self.cache = cache
        self.keys = keys
        self.mapper = mapper
        self.decrypted: set[str] = set()  # patch files of this build that were encrypted
        self.warnings: dict[Problem, None] = {}  # this build's, in order, each once
        self._kust_files: dict[str, str | None] = {}  # directory -> its kustomization file, per build
        self._joined: dict[tuple[str, str], str] = {}  # join_path's results, per build

    def __setattr__(self, name: str, value: Any) -> None:
        """A schema set mid-build changes what the steps that ran before it would make: the
        records those steps made that rest derived get their trees first (``OverlayCache.steps_change``)."""
        if name == "schema" and value is not None:
            self.cache.steps_change()
        object.__setattr__(self, name, value)

    def join(self, base: str, rel: str) -> str:
        """``join_path``, remembered for this build (a build joins the same few hundred
        paths tens of thousands of times)."""
        got = self._joined.get((base, rel))
        if got is None:
            got = self._joined[(base, rel)] = join_path(base, rel)
        return got

    def blob(self, path: str) -> str | None:
        """The cache key of a file's content: its blob id, and with keys the keys' token
        (what other keys decrypted is never reused)."""
        try:
            blob = self.files.blob_id(path)
        except (OSError, ManifestError):
            return None
        if blob is not None and self.keys is not None:
            return f"{blob}@{self.keys.token}"
        return blob

    # -- SOPS ----------------------------------------------------------------------------------

    def open_docs(
        self, docs: Sequence[Any], data: bytes, path: str, lines: Sequence[int]
    ) -> list[Any] | None:
        """The documents of a SOPS-encrypted YAML or JSON file in clear, its ``sops`` keys
        removed; None for a file that is not encrypted."""
        if not encrypted_documents(docs):
            return None
        try:
            if self.keys is None:
                checked_meta(docs)  # metadata of the wrong shape is said as such, keys or not
                line, col = locate(data, lines[0] if lines else 1, ("sops",))
                raise OverlayError(NO_KEYS, path, line, col)
            return open_documents(docs, self.keys)
        except SopsProblem as err:
            raise problem_at(err, data, path, lines) from err

    def open_file(self, data: bytes, path: str, name: str) -> bytes | None:
        """A whole encrypted file (a generator's file or env file) in clear; None for a
        file that is not encrypted."""
        if file_format(data, name) is None:
            return None
        if self.keys is None:
            raise OverlayError(NO_KEYS, path, 1, 1)
        return open_file(data, path, name, self.keys)

    def inside(self, obj: dict[str, Any], data: bytes, path: str, line: int) -> tuple[dict[str, Any], bool]:
        """A Secret whose ``data`` values are whole SOPS files (as Flux decrypts them),
        those values in clear; and whether any was."""
        values = obj.get("data")
        if obj.get("kind") != "Secret" or not isinstance(values, dict):
            return obj, False
        out = dict(values)
        for key, value in values.items():
            if not isinstance(value, str) or len(value) < 64:
                continue
            try:
                raw = base64.b64decode("".join(value.split()), validate=True)
            except (binascii.Error, ValueError):
                continue
            if file_format(raw, str(key)) is None:
                continue
            if self.keys is None:
                raise OverlayError(NO_KEYS, path, *locate(data, line, ("data", key)))
            try:
                opened = open_file(raw, path, str(key), self.keys)
            except ManifestError as err:
                raise OverlayError(
                    f"data.{key}: {err.message}", path, *locate(data, line, ("data", key))
                ) from err
            out[key] = base64.b64encode(opened).decode()
        if out == values:
            return obj, False
        return {**obj, "data": out}, True

    def read(self, path: str) -> bytes:
        try:
            return self.files.read(path)
        except ManifestError:
            raise
        except (OSError, KeyError) as err:
            raise OverlayError(f"cannot read {path}: {err}") from err

    def find_kustomization(self, directory: str) -> str | None:
        if directory in self._kust_files:
            return self._kust_files[directory]
        found = [
            self.join(directory, name)
            for name in KUSTOMIZATION_FILES
            if self.files.exists(self.join(directory, name))
            and not self.files.is_dir(self.join(directory, name))
        ]
        if len(found) > 1:
            raise OverlayError(
                f"found more than one kustomization file in {directory or '.'}: {', '.join(found)}"
            )
        self._kust_files[directory] = found[0] if found else None
        return self._kust_files[directory]

    def load_kust(self, directory: str) -> Kust:
        path = self.find_kustomization(directory)
        if path is None:
            raise OverlayError(f"no kustomization file in {directory or '.'}")
        blob = self.blob(path)
        cache_key = None if blob is None else f"kustomization:{blob}"
        hit = self.cache.docs_get(path, cache_key)
        if hit is not None:  # kept only once checked: a content is checked once
            data, docs, lenient, positions = hit
        else:
            data = self.read(path)
            duplicates: list[tuple[str, int, int]] = []
            raw = parse_yaml11(data, path, last_key_wins=True, duplicates=duplicates)
            docs = [field_names(d, self.transformer_fields) for d in raw]
            lenient = _leniency(data, path, raw, docs, duplicates)
            positions = Positions(data)  # composed at the first error or position asked
        self.warnings.update(dict.fromkeys(lenient))
        doc = docs[0] if docs else {}
        if len(docs) > 1 or not isinstance(doc, dict):
            raise OverlayError("a kustomization file holds one mapping", path, 1, 1)
        kust = Kust(directory, path, data, doc, blob, positions=positions)
        kust.reads.append((path, kust.blob))
        if hit is None:
            if not set(doc) - {"apiVersion", "kind"}:
                raise OverlayError(f"{posixpath.basename(path)} is empty", path, 1, 1)
            check_fields(kust, self.transformer_fields, self.transformer_shapes, self.transformer_types)
            self.cache.docs_put(path, cache_key, (data, docs, lenient, positions))
        return kust

    def kust_file(self, kust: Kust, rel: str, where: tuple[str | int, ...]) -> str:
        """A plain file named by ``kust``: must be in or below the kustomization's directory."""
        if REMOTE.search(rel):
            raise kust.error(f"remote file {rel!r} is not supported", *where)
        try:
            path = self.join(kust.dir, rel)
        except OverlayError as err:
            raise kust.error(str(err), *where) from err
        if not within(path, kust.dir):
            raise kust.error(f"security; file '{path}' is not in or below '{kust.dir or '.'}'", *where)
        if not self.files.exists(path) or self.files.is_dir(path):
            raise kust.error(f"file {rel!r} not found", *where)
        kust.reads.append((path, self.blob(path)))
        return path

    def read_kust_file(self, kust: Kust, rel: str, where: tuple[str | int, ...]) -> tuple[str, bytes]:
        path = self.kust_file(kust, rel, where)
        return path, self.read(path)

    def patch_file_docs(self, path: str, text_fields: tuple[str, ...]) -> list[Any]:
        """The documents of a patch file, parsed (and decrypted) once per content (a
        component included many times is read once); each caller gets its own copy to
        merge from. An encrypted one is noted in ``decrypted``."""
        blob = self.blob(path)
        key = None if blob is None else f"patch:{','.join(text_fields)}:{blob}"
        hit = self.cache.docs_get(path, key)
        if hit is None:
            data = self.read(path)
            docs = parse_yaml_value(data, path, text_fields)
            if len(docs) == 1 and isinstance(docs[0], list):
                docs = parse_yaml11(data, path)
            opened = self.open_docs(docs, data, path, [1] * len(docs))
            hit = (docs, False) if opened is None else (opened, True)
            self.cache.docs_put(path, key, hit)
        docs, encrypted = hit
        if encrypted:
            self.decrypted.add(path)
        return [clone(d) for d in docs]

    def parse_file(self, path: str, blob: str | None = None) -> tuple[Res, ...]:
        blob = blob if blob is not None else self.blob(path)
        hit: tuple[Res, ...] | None = self.cache.docs_get(path, blob)
        if hit is not None:
            return hit
        result = self._objects(self.read(path), path)
        self.cache.docs_put(path, blob, result)
        return result

    def _objects(self, data: bytes, path: str) -> tuple[Res, ...]:
        manifests = parse_objects(data, path)
        sealed = self.keys is not None and self.keys.sealed
        opened = self.open_docs([m.obj for m in manifests], data, path, [m.line for m in manifests])
        out: list[Res] = []
        if opened is not None:
            for m, obj in zip(manifests, opened, strict=True):
                if obj.get("kind") != "Secret":
                    raise OverlayError(
                        f"a SOPS-encrypted file may hold Secrets only: a decrypted {obj.get('kind') or 'object'} "
                        "would show its values in plans, diffs and domain XML",
                        path,
                        m.line,
                        1,
                    )
                out.extend(replace(r, sealed=sealed) for r in self.expand_list(obj, m.path, m.line))
            return tuple(out)
        for m in manifests:
            obj, inside = self.inside(m.obj, data, path, m.line)
            for r in self.expand_list(obj, m.path, m.line):
                out.append(replace(r, sealed=sealed) if inside and sealed else r)
        return tuple(out)

    def plain_documents(self, path: str) -> tuple[Manifest, ...]:
        """The documents of a file of an entry without a kustomization, decrypted if it is
        a SOPS file (then Secrets only)."""
        data = self.files.read(path)
        docs = parse_documents(data, path)
        opened = self.open_docs([m.obj for m in docs], data, path, [m.line for m in docs])
        if opened is None:
            return docs
        for m, obj in zip(docs, opened, strict=True):
            if obj.get("kind") != "Secret":
                raise OverlayError("a SOPS-encrypted file may hold Secrets only", path, m.line, 1)
        sealed = self.keys is not None and self.keys.sealed
        return tuple(Manifest(obj, m.path, m.line, sealed) for m, obj in zip(docs, opened, strict=True))

    def parse_files(self, paths: Sequence[str]) -> dict[str, tuple[Res, ...]]:
        """Parse the files of ``paths`` not in the cache yet through the mapper (into the
        cache, and returned by path): this process reads their bytes, the mapped function
        parses (and decrypts) only. A file that cannot be read or does not parse as
        objects is left out, to ``parse_file``, which reads it again and reports it where
        the build meets it."""
        todo: list[tuple[str, str, bytes]] = []
        for path in paths:
            blob = self.blob(path)
            if blob is None or self.cache.docs_get(path, blob) is not None:
                continue
            try:
                todo.append((path, blob, self.read(path)))
            except ReconcilerError:
                continue
        out: dict[str, tuple[Res, ...]] = {}
        for (path, blob, _data), got in zip(todo, self.mapper.map(self._parsed, todo), strict=True):
            if got is not None:
                self.cache.docs_put(path, blob, got)
                out[path] = got
        return out

    def _parsed(self, item: tuple[str, str, bytes]) -> tuple[Res, ...] | None:
        path, _blob, data = item
        try:
            return self._objects(data, path)
        except ReconcilerError:
            return None

    @staticmethod
    def expand_list(obj: dict[str, Any], path: str, line: int) -> list[Res]:
        kind = str(obj.get("kind") or "")
        if (kind.endswith("List") and isinstance(obj.get("items"), list) and "metadata" not in obj) or (
            kind == "List" and isinstance(obj.get("items"), list)
        ):
            return [
                Res(item, path, line, origin=(path, "")) for item in obj["items"] if isinstance(item, dict)
            ]
        if not obj.get("kind"):
            raise OverlayError("missing kind in object", path, line, 1)
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise OverlayError("missing metadata.name in object", path, line, 1)
        return [Res(obj, path, line, origin=(path, ""))]

    # -- memo ------------------------------------------------------------------------------------


def _leniency(
    data: bytes, path: str, raw: list[Any], docs: list[Any], duplicates: list[tuple[str, int, int]]
) -> tuple[Problem, ...]:
    """Where kustomize is lenient with a kustomization file, a warning at the line: a key
    given twice (the last wins) and a field name in another case (Go's decoder matches it)."""
    out = [
        Problem(f"{key!r} is given again: kustomize takes this one", path=path, line=line, column=col,
                severity=Severity.WARNING)
        for key, line, col in duplicates
    ]  # fmt: skip
    for before, after in zip(raw, docs, strict=True):
        if before is after or not isinstance(before, dict) or len(before) != len(after):
            continue  # nothing renamed (or two names of one field, which the renamed dict shows)
        for key, name in zip(before, after, strict=True):
            if key != name:
                line, col = locate(data, 1, (key,))
                out.append(
                    Problem(f"{key!r} is read as {name!r} (kustomize matches a field name in any case)",
                            path=path, line=line, column=col, severity=Severity.WARNING)
                )  # fmt: skip
    return tuple(out)
