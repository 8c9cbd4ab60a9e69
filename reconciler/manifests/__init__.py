"""The YAML module: every byte of YAML the project reads or writes goes through here.

``reader`` parses manifests (libyaml's composer through PyYAML's C extension, our own resolver: YAML 1.2 scalars,
duplicate keys refused, alias and nesting budgets, errors at file:line:col);
``positions`` finds a field's line; ``printer`` prints objects as ``kubectl kustomize``
does, byte for byte; ``config`` reads configuration files with positions kept. The names below are the
interface the other stages use; ruamel (configuration files) and PyYAML (manifests) are
imported nowhere else.
"""

from reconciler.manifests.positions import field_position, locate
from reconciler.manifests.printer import clone, dump_documents
from reconciler.manifests.reader import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    ScalarText,
    parse_documents,
    parse_objects,
    parse_yaml11,
    parse_yaml_value,
)

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "ScalarText",
    "clone",
    "dump_documents",
    "field_position",
    "locate",
    "parse_documents",
    "parse_objects",
    "parse_yaml11",
    "parse_yaml_value",
]
