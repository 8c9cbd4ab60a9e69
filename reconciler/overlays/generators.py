"""configMapGenerator / secretGenerator and the content hash kustomize appends to names.

Input: generator arguments from a kustomization and a reader for the files they name.
Output: ConfigMap / Secret objects (plain trees), and ``content_hash(obj)``. Pure: files
come through the caller's reader; an env file line without ``=`` (kustomize would read
the process environment) is an error here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
from collections.abc import Callable
from typing import Any

from reconciler.errors import OverlayError

Reader = Callable[[str], bytes]  # path relative to the kustomization dir -> bytes


def _literal(source: str, secret: bool = False) -> tuple[str, str]:
    if "=" not in source:
        shown = "of a Secret" if secret else repr(source)  # a Secret's text is never echoed
        raise OverlayError(f"literal {shown} is not of the form KEY=VALUE")
    key, value = source.split("=", 1)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return key, value


def _env_pairs(data: bytes, path: str, secret: bool = False) -> list[tuple[str, str]]:
    text = data.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip()
        if not line or line.startswith("#"):
            continue
        shown = "" if secret else f" {line.strip()!r}"  # a Secret's text is never echoed
        if "=" not in line:
            raise OverlayError(
                f"{path}:{lineno}: env line{shown} has no '=' "
                "(reading values from the environment is not supported)"
            )
        key, value = line.split("=", 1)
        if not key:
            raise OverlayError(f"{path}:{lineno}: env line{shown} has an empty key")
        out.append((key, value))
    return out


def _file_pair(source: str, read: Reader) -> tuple[str, bytes]:
    if "=" in source:
        key, path = source.split("=", 1)
        if not key:
            raise OverlayError(f"file source {source!r} has an empty key")
    else:
        key, path = posixpath.basename(source), source
    return key, read(path)


def generate(
    kind: str, args: dict[str, Any], options: dict[str, Any], read: Reader
) -> tuple[dict[str, Any], bool]:
    """The object for one generator entry, and whether it takes the name hash suffix."""
    name = args.get("name")
    if not name:
        raise OverlayError(f"{kind} generator entry without a name")
    pairs: list[tuple[str, bytes | str]] = []
    for src in [*(args.get("envs") or ()), *([args["env"]] if args.get("env") else [])]:
        pairs.extend(_env_pairs(read(str(src)), str(src), kind == "Secret"))
    for lit in args.get("literals") or ():
        pairs.append(_literal(str(lit), kind == "Secret"))
    for src in args.get("files") or ():
        pairs.append(_file_pair(str(src), read))
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    for key, value in pairs:
        if key in data or key in binary:
            raise OverlayError(f"{kind} {name}: key {key!r} is given more than once")
        if kind == "Secret":
            raw = value.encode() if isinstance(value, str) else value
            data[key] = encode_base64(raw)
        elif isinstance(value, bytes):
            try:
                data[key] = value.decode("utf-8")
            except UnicodeDecodeError:
                binary[key] = base64.b64encode(value).decode()
        else:
            data[key] = value
    meta: dict[str, Any] = {"name": str(name)}
    if args.get("namespace"):
        meta["namespace"] = str(args["namespace"])
    labels = {str(k): str(v) for k, v in (options.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (options.get("annotations") or {}).items()}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": meta}
    if kind == "Secret":
        obj["type"] = str(args.get("type") or "Opaque")
    if data:
        obj["data"] = data
    if binary:
        obj["binaryData"] = binary
    if options.get("immutable"):
        obj["immutable"] = True
    return obj, not options.get("disableNameSuffixHash", False)


def merge_options(local: dict[str, Any] | None, global_: dict[str, Any] | None) -> dict[str, Any]:
    """kustomize's MergeGlobalOptionsIntoLocal: maps are merged, local flags win."""
    local = dict(local or {})
    global_ = dict(global_ or {})
    out: dict[str, Any] = {}
    for key in ("labels", "annotations"):
        merged = {**(global_.get(key) or {}), **(local.get(key) or {})}
        if merged:
            out[key] = merged
    for flag in ("disableNameSuffixHash", "immutable"):
        if local.get(flag) or global_.get(flag):
            out[flag] = True
    return out


def encode_base64(data: bytes) -> str:
    """Base64 as kustomize writes Secret data: lines of 70, each ending in a newline."""
    enc = base64.b64encode(data).decode()
    if len(enc) < 70:
        return enc
    return "".join(enc[i : i + 70] + "\n" for i in range(0, len(enc), 70))


def _go_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _field(obj: dict[str, Any], key: str) -> Any:
    value = obj.get(key)
    if value is None:
        return ""
    return value


def content_hash(obj: dict[str, Any]) -> str:
    """The 10-character suffix kustomize derives from a ConfigMap's or Secret's content."""
    kind = obj.get("kind")
    # kustomize 5 looks the name up with a path its lookup never matches, so the name
    # it hashes is always empty; renaming a generated object keeps its suffix.
    name = ""
    if kind == "ConfigMap":
        m: dict[str, Any] = {"kind": "ConfigMap", "name": name, "data": _field(obj, "data")}
        if isinstance(obj.get("binaryData"), dict):
            m["binaryData"] = obj["binaryData"]
    elif kind == "Secret":
        m = {"kind": "Secret", "type": _field(obj, "type"), "name": name, "data": _field(obj, "data")}
        if isinstance(obj.get("stringData"), dict):
            m["stringData"] = obj["stringData"]
    else:
        m = obj
    digest = hashlib.sha256(_go_json(m).encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))
