"""The kustomize transformers, in the order kustomize 5 runs them at each level.

A transformer is a module with ``FIELDS`` (the kustomization fields it reads), their
``SHAPES`` and ``TYPES`` (checked strictly, as kustomize reads a kustomization) and
``run(builder, kust, acc)``, which rewrites ``acc.res``. Adding one: a module here and
its line in ``TRANSFORMERS``, at kustomize's place in the order.
"""

from __future__ import annotations

from types import MappingProxyType

from reconciler.overlays.transformers import (
    common_annotations,
    images,
    labels,
    namespace,
    patches,
    patches_json6902,
    patches_strategic_merge,
    prefix_suffix,
    replacements,
)

TRANSFORMERS = (
    patches_strategic_merge,
    patches,
    namespace,
    prefix_suffix,
    labels,
    common_annotations,
    patches_json6902,
    images,
    replacements,
)

FIELDS = frozenset(f for t in TRANSFORMERS for f in t.FIELDS)
SHAPES = MappingProxyType({k: v for t in TRANSFORMERS for k, v in t.SHAPES.items()})
TYPES = MappingProxyType({k: v for t in TRANSFORMERS for k, v in t.TYPES.items()})
