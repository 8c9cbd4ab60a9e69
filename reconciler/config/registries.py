"""The ``registries:`` section of a host configuration: how this host reaches registries.

Input: the parsed ``registries`` mapping of a host config and the ``ConfigReader`` of its
file. Output: a frozen ``Registries`` (``settings.registries``). Pure: the auth file is named, never read here (it
is read by ``skopeo`` when an image is pulled). Errors are ``ConfigError``s at the
key's file:line, as the rest of the host configuration's.

The keys ``insecure``, ``mirrors`` and ``authFile`` are the fields of ``Registries``;
``settings.registries`` says what each means.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.settings.registries import Registries, is_registry_host

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.manifests.config import ConfigReader

_KEYS = ("insecure", "mirrors", "authFile")


def _hosts(r: ConfigReader, node: Any, where: str, parent: Any, key: Any) -> tuple[str, ...]:
    if not isinstance(node, list):
        raise r.fail(f'{where}: expected a list of registries ("HOST:PORT")', parent, key)
    out: list[str] = []
    for i, item in enumerate(node):
        if not isinstance(item, str) or not is_registry_host(item):
            raise r.fail(
                f'{where}[{i}]: expected a registry as "HOST" or "HOST:PORT" (no scheme, no path)', node, i
            )
        if item in out:
            raise r.fail(f"{where}[{i}]: {item} is listed twice", node, i)
        out.append(item)
    return tuple(out)


def registries_from_obj(r: ConfigReader, top: Mapping[str, Any]) -> Registries:
    """The ``registries`` section of ``top`` (the host config mapping), checked."""
    node = r.mapping(top["registries"], "registries", _KEYS, top, "registries")
    insecure: tuple[str, ...] = ()
    if "insecure" in node:
        insecure = _hosts(r, node["insecure"], "registries.insecure", node, "insecure")
    mirrors: dict[str, tuple[str, ...]] = {}
    if "mirrors" in node:
        mm = node["mirrors"]
        r.mapping(mm, "registries.mirrors", tuple(mm or ()), node, "mirrors")
        for source, targets in (mm or {}).items():
            if not isinstance(source, str) or not is_registry_host(source):
                raise r.fail(
                    'registries.mirrors: a key is a registry as "HOST" or "HOST:PORT"',
                    mm,
                    source,
                    at_key=True,
                )
            where = f"registries.mirrors[{source!r}]"
            listed = _hosts(r, targets, where, mm, source)
            if not listed:
                raise r.fail(f"{where}: expected at least one mirror", mm, source)
            if source in listed:
                raise r.fail(f"{where}: a registry is not its own mirror", mm, source)
            mirrors[source] = listed
    auth = r.abspath(node, "authFile", "registries") or ""
    return Registries(insecure=insecure, mirrors=mirrors, auth_file=auth)


__all__: list[str] = ["Registries", "is_registry_host", "registries_from_obj"]
