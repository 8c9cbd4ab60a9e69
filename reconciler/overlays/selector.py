"""kustomize's target selectors and Kubernetes label selectors, matched against resources.

Input: a selector spec of a patch or replacement target (group, version, kind, name,
namespace, labelSelector, annotationSelector), or a label selector string. Output: a
``Selector`` that matches ``Res`` records (patch semantics: original or current id;
replacement semantics: exact fields), and label predicates. Bad patterns and selectors
raise ``OverlayError``. Pure.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from reconciler.errors import OverlayError
from reconciler.manifests.patterns import Pattern, PatternError, compile_pattern
from reconciler.overlays.resource import Res, ResId, effective_ns
from reconciler.wording.escape import printable, shortened

if TYPE_CHECKING:
    from collections.abc import Callable


def _regex(pattern: str, what: str) -> Pattern:
    """kustomize's ``regexp.Compile("^(?:" + pattern + ")$")``, run as Go runs it (RE2)."""
    try:
        return compile_pattern(f"(?:{pattern})")
    except PatternError as err:
        raise OverlayError(
            f"invalid {what} pattern {printable(shortened(pattern))!r} (Go's RE2 syntax, as kustomize reads it): "
            f"{err.message}"
        ) from err


_LABEL_REQ = re.compile(
    r"""^\s*(?:
        (?P<not>!)\s*(?P<nkey>[^\s,!=()]+)
      | (?P<key>[^\s,!=()]+)\s*
        (?:(?P<op>==|=|!=)\s*(?P<value>[^\s,!=()]*)
          |\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)
        )?
    )\s*$""",
    re.VERBOSE,
)


def split_outside(text: str, sep: str, opening: str, closing: str) -> list[str]:
    """``text`` split at each ``sep`` not inside ``opening``...``closing`` (kustomize's
    label selectors split at commas outside parentheses, field paths at dots outside
    brackets)."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


class _Requirement:
    """One requirement of a label selector: ``op`` is =, !=, in, notin, exists or !exists."""

    def __init__(self, key: str, op: str, values: frozenset[str]) -> None:
        self.key, self.op, self.values = key, op, values

    def __call__(self, labels: dict[str, Any]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        value = _label_text(labels[self.key]) if present else None
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values


def parse_label_selector(text: str) -> Callable[[dict[str, Any]], bool]:
    """A Kubernetes label selector (``a=b,c!=d,e in (x,y),!f,g``) as a predicate."""
    tests: list[_Requirement] = []
    for part in (p for p in split_outside(text, ",", "(", ")") if p.strip()):
        m = _LABEL_REQ.match(part)
        if not m:
            raise OverlayError(f"invalid label selector {text!r}")
        if m.group("not"):
            tests.append(_Requirement(m.group("nkey"), "!exists", frozenset()))
            continue
        k = m.group("key")
        op, setop = m.group("op"), m.group("setop")
        if op in ("=", "=="):
            tests.append(_Requirement(k, "=", frozenset([m.group("value")])))
        elif op == "!=":
            tests.append(_Requirement(k, "!=", frozenset([m.group("value")])))
        elif setop:
            values = frozenset(x.strip() for x in m.group("values").split(",") if x.strip())
            tests.append(_Requirement(k, setop, values))
        else:
            tests.append(_Requirement(k, "exists", frozenset()))
    return lambda labels: all(t(labels) for t in tests)


def _label_text(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


class Selector:
    """kustomize's patch/replacement target selector."""

    def __init__(self, spec: dict[str, Any], regex: bool = True) -> None:
        def text(key: str) -> str:
            v = spec.get(key)
            return "" if v is None else str(v)

        self.group = text("group")
        self.version = text("version")
        self.kind = text("kind")
        self.name = text("name")
        self.namespace = text("namespace")
        self.regex = regex
        self.name_re = _regex(self.name, "name") if regex and self.name else None
        self.ns_re = _regex(self.namespace, "namespace") if regex and self.namespace else None
        ls, anns = text("labelSelector"), text("annotationSelector")
        self.label_sel = parse_label_selector(ls) if ls else None
        self.ann_sel = parse_label_selector(anns) if anns else None
        self.key = tuple(sorted((k, str(v)) for k, v in spec.items()))

    def gvk_matches(self, rid: ResId) -> bool:
        return (
            (not self.group or rid.group == self.group)
            and (not self.version or rid.version == self.version)
            and (not self.kind or rid.kind == self.kind)
        )

    def _name_ok(self, name: str) -> bool:
        if not self.name:
            return True
        if self.name_re is not None:
            return self.name_re.fullmatch(name)
        return name == self.name

    def _ns_ok(self, ns: str) -> bool:
        if not self.namespace:
            return True
        if self.ns_re is not None:
            return self.ns_re.fullmatch(ns)
        return ns == self.namespace

    def matches(self, res: Res) -> bool:
        """Patch-target semantics: original or current name/namespace, current GVK."""
        cur, org = res.cur, res.org
        if not (self._ns_ok(effective_ns(org)) or self._ns_ok(effective_ns(cur))):
            return False
        if not (self._name_ok(org.name) or self._name_ok(cur.name)):
            return False
        if not self.gvk_matches(cur):
            return False
        if self.label_sel is not None and not self.label_sel(res.labels()):
            return False
        return not (self.ann_sel is not None and not self.ann_sel(res.annotations()))

    def matches_exact(self, res: Res, any_id: bool = True) -> bool:
        """Replacement semantics: exact fields, against the current id (or any previous one)."""
        ids = res.all_ids() if any_id else (res.cur,)
        ok = False
        for rid in ids:
            if (
                self.gvk_matches(rid)
                and (not self.name or rid.name == self.name)
                and (not self.namespace or rid.namespace == self.namespace)
            ):
                ok = True
                break
        if not ok:
            return False
        if self.label_sel is not None and not self.label_sel(res.labels()):
            return False
        return not (self.ann_sel is not None and not self.ann_sel(res.annotations()))
