"""Configuration files (the daemon's, a host's) read with positions kept.

Input: the bytes of a YAML file and its path. Output: the parsed mapping (ruamel's
round-trip tree, whose nodes remember their line and column) and ``ConfigReader``,
which walks it and reports every unknown key or wrong type as
``ConfigError(message, path, line, column)``. Pure, but for ``read_config_file``:
every configuration, facts, key or secret file is read through it (``limits``' one
bounded reader), so a device, a FIFO or an oversized file is a ``ConfigError``
naming it, never a hang or a MemoryError. An error never quotes a value (a duplicate key
is named, its values are not: a file may hold a secret).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from reconciler.errors import ConfigError
from reconciler.manifests.limits import read_regular_file
from reconciler.wording.escape import printable

MAX_CONFIG_BYTES = 4 << 20  # a config, key or secret file (the example config is 6 KiB)


def read_config_file(path: str, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of a configuration file, at most ``limit``. A missing file stays
    ``FileNotFoundError`` (the caller knows whether that is fine); any other failure
    to read is a ``ConfigError`` naming the file."""
    try:
        return read_regular_file(path, path, limit, ConfigError)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise ConfigError(f"cannot read it: {err.strerror or err}", path) from err


def read_existing_config_file(path: str, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """``read_config_file``, a missing file being a ``ConfigError`` too."""
    try:
        return read_config_file(path, limit)
    except FileNotFoundError as err:
        raise ConfigError("no such file", path) from err


_DUPLICATE = re.compile(r'found duplicate key "(.*?)" with value', re.DOTALL)


def load_config_yaml(data: bytes, path: str) -> Any:
    """A configuration file parsed with positions kept (for file:line:col errors). ruamel
    is imported here, at the first file read: a command reading none starts without it."""
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError

    yaml = YAML(typ="rt", pure=True)
    try:
        return yaml.load(data)
    except DuplicateKeyError as err:  # ruamel's message holds both values: a secret's, maybe
        mark, first = err.problem_mark, err.context_mark
        key = _DUPLICATE.search(str(err.problem or ""))
        shown = printable(key.group(1))[:80] if key else "a key"
        where = f" (in the mapping at line {first.line + 1})" if first is not None else ""
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise ConfigError(f"duplicate key {shown!r}{where}", path, line, col) from None
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = str(err.problem or err)
        if isinstance(err, DuplicateKeyError):  # ruamel quotes both values: never shown
            problem = problem.partition(" with value ")[0]
        raise ConfigError(f"invalid YAML: {problem}", path, line, col) from None
    except Exception as err:  # ruamel raises a few unmarked error types too
        raise ConfigError(f"invalid YAML: {err}", path) from err


class ConfigReader:
    """Walks a parsed configuration mapping, reporting positions when the parser kept them.

    Shared by the host and the daemon configuration; ``null_is_absent`` says whether
    ``key: null`` reads as an absent key (else it is a type error).
    """

    null_is_absent = False

    def __init__(self, path: str) -> None:
        self.path = path

    def pos(self, node: Any, key: Any = None) -> tuple[int, int]:
        from ruamel.yaml.comments import CommentedMap, CommentedSeq

        if isinstance(node, CommentedSeq) and isinstance(key, int):
            try:
                line, col = node.lc.item(key)
                return line + 1, col + 1
            except (KeyError, TypeError, AttributeError, IndexError):
                return 0, 0
        if isinstance(node, CommentedMap):
            try:
                if key is not None:
                    line, col = node.lc.value(key) if key in node else node.lc.key(key)
                else:
                    line, col = node.lc.line, node.lc.col
                return line + 1, col + 1
            except (KeyError, TypeError, AttributeError):
                return 0, 0
        return 0, 0

    def key_pos(self, node: Any, key: Any) -> tuple[int, int]:
        from ruamel.yaml.comments import CommentedMap

        if isinstance(node, CommentedMap):
            try:
                line, col = node.lc.key(key)
                return line + 1, col + 1
            except (KeyError, TypeError, AttributeError):
                return 0, 0
        return 0, 0

    def fail(self, message: str, node: Any = None, key: Any = None, at_key: bool = False) -> ConfigError:
        line, col = self.key_pos(node, key) if at_key else self.pos(node, key)
        return ConfigError(message, self.path, line, col)

    def mapping(
        self, node: Any, where: str, allowed: tuple[str, ...], parent: Any = None, pkey: Any = None
    ) -> Mapping[str, Any]:
        if node is None:
            return {}
        if not isinstance(node, Mapping):
            raise self.fail(f"{where}: expected a mapping", parent, pkey)
        for k in node:
            if k not in allowed:
                raise self.fail(
                    f"{where}: unknown key {k!r} (known: {', '.join(allowed)})", node, k, at_key=True
                )
        return node

    def string(
        self, node: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...] = ()
    ) -> str | None:
        if key not in node or (self.null_is_absent and node[key] is None):
            return None
        v = node[key]
        if not isinstance(v, str):
            raise self.fail(f"{where}.{key}: expected a string", node, key)
        if choices and v not in choices:
            shown = ", ".join(c or '""' for c in choices)
            raise self.fail(f"{where}.{key}: {v!r} is not one of {shown}", node, key)
        return v

    def boolean(self, node: Mapping[str, Any], key: str, where: str) -> bool | None:
        if key not in node:
            return None
        v = node[key]
        if not isinstance(v, bool):
            raise self.fail(f"{where}.{key}: expected true or false", node, key)
        return v

    def abspath(self, node: Mapping[str, Any], key: str, where: str) -> str | None:
        v = self.string(node, key, where)
        if v is None:
            return None
        if not v.startswith("/") or posixpath.normpath(v) != v.rstrip("/") or "\x00" in v:
            raise self.fail(f"{where}.{key}: {v!r} must be an absolute, normalized path", node, key)
        return v.rstrip("/") or "/"
