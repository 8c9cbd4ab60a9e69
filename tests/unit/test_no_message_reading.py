"""No module outside ``reconciler/wording/`` reads one of our own messages back.

Covers: walking every module of ``reconciler`` but ``wording/`` with ``ast``, no code
cuts a text on ``";"`` (``.split("; ")``, ``.partition(";")``...: how our messages join
their parts), and no code searches a message (a regular expression over it, ``"x" in
str(err)``, ``text.startswith(...)`` of an error's text): what a reader needs of an
outcome is a field of its record (``ReconcileStatus.first_error``, ``SignatureError.commit``,
``WindowError.key``). A message is an expression named so (``message``, ``msg``,
``error``, ``err``, ``reason``, ``why``, ``words``, ``*_message``, ``*_error``...),
``str()`` of an exception, or a local name given one of those. ``ALLOWED`` names, by
module and function, the code that parses the user's own text with the same syntax, each
with why. The checker itself is tested on the shapes it must find and must leave alone,
so it cannot pass by finding nothing.

Nor does a module that lays an outcome out (the plan's text), carries its records (a PR
diff's entry, the refusal ``state.json`` keeps) or finds what happened (the events of a
reconcile, a saved plan's check, a commit status, a rollback) make the words itself:
``WORDLESS`` modules hold no sentence (a string, or an f-string's text, of two words or
more; docstrings aside), they ask ``wording/``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"

# (module, function) -> why what it cuts or searches is not one of our messages.
ALLOWED: dict[tuple[str, str], str] = {
    ("reconciler/settings/windows.py", "parse_annotation"): (
        'a VM\'s restart-window annotation, "SCHEDULE; DURATION[; TIME ZONE]", is written by the user'
    ),
    ("reconciler/catalog/schema.py", "_problem"): (
        "jsonschema's own message names the missing property of a `required` error (one error per "
        "property, and the record carries no other field naming it)"
    ),
    ("reconciler/cli/parser.py", "_did_you_mean"): (
        "argparse says what it refused only in its message: the wrong option or choice is taken from "
        "it to suggest the close one"
    ),
}

MESSAGE_NAME = re.compile(
    r"(?:message|messages|msg|error|errors|err|reason|reasons|why|words|first_error|said|detail)"
    r"|.*_(?:message|messages|msg|error|errors|reason|reasons)"
)
EXCEPTION_NAME = re.compile(r"err|error|exc|e|ex|why")
REGEX_CALLS = frozenset({"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"})
TEXT_SEARCHES = frozenset({"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "split",
                           "rsplit", "partition", "rpartition", "splitlines"})  # fmt: skip
CUTS = frozenset({"split", "rsplit", "partition", "rpartition"})


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


class Finder(ast.NodeVisitor):
    """The places of one module that read a message back, as ``line: what``."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int, str]] = []  # (function, line, what)
        self.function = ""
        self.messages: set[str] = set()  # local names given a message

    def is_message(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Call) and _name(node.func) == "str" and len(node.args) == 1:
            arg = node.args[0]
            return bool(EXCEPTION_NAME.fullmatch(_name(arg))) or self.is_message(arg)
        if isinstance(node, ast.Name) and node.id in self.messages:
            return True
        name = _name(node)
        return bool(name) and bool(MESSAGE_NAME.fullmatch(name))

    def report(self, node: ast.AST, what: str) -> None:
        self.found.append((self.function, getattr(node, "lineno", 0), what))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = (self.function, self.messages)
        self.function, self.messages = node.name, set()
        self.generic_visit(node)
        self.function, self.messages = outer

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def visit_Assign(self, node: ast.Assign) -> None:
        if self.is_message(node.value):
            self.messages.update(t.id for t in node.targets if isinstance(t, ast.Name))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and (what := self.reading(node.func, node.args)):
            self.report(node, what)
        self.generic_visit(node)

    def reading(self, func: ast.Attribute, args: list[ast.expr]) -> str:
        """What ``<func.value>.<func.attr>(*args)`` reads of a message (``""``: nothing)."""
        first = args[0] if args else None
        literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        regex_module = _name(func.value) == "re"
        if func.attr in CUTS and literal is not None and ";" in literal:
            return f".{func.attr}({literal!r})"  # how our messages join their parts
        if func.attr in TEXT_SEARCHES and self.is_message(func.value):
            return f"{ast.unparse(func.value)}.{func.attr}(...)"
        if func.attr in REGEX_CALLS and regex_module and len(args) >= 2 and self.is_message(args[1]):
            return f"re.{func.attr}(..., {ast.unparse(args[1])})"
        compiled = func.attr in REGEX_CALLS and func.attr != "split" and not regex_module
        if compiled and first is not None and literal is None and self.is_message(first):
            return f"{ast.unparse(func.value)}.{func.attr}({ast.unparse(first)})"  # a compiled pattern's
        return ""

    def visit_Compare(self, node: ast.Compare) -> None:
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            searched = isinstance(op, ast.In | ast.NotIn) and self.is_message(right)
            if searched and isinstance(left, ast.Constant) and isinstance(left.value, str):
                self.report(node, f"{left.value!r} in {ast.unparse(right)}")
        self.generic_visit(node)


def readings(source: str, module: str = "") -> list[tuple[str, int, str]]:
    """Where ``source`` reads a message back, but what ``ALLOWED`` names for ``module``."""
    finder = Finder()
    finder.visit(ast.parse(source))
    return [f for f in finder.found if (module, f[0]) not in ALLOWED]


def modules() -> list[Path]:
    wording = PACKAGE / "wording"
    return sorted(
        p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts and wording not in p.parents
    )


def test_no_module_outside_wording_reads_a_message_back() -> None:
    found: dict[str, Any] = {}
    for path in modules():
        name = path.relative_to(ROOT).as_posix()
        hits = readings(path.read_text(encoding="utf-8"), name)
        if hits:
            found[name] = [f"{line}: {what} (in {fn or 'the module'})" for fn, line, what in hits]
    assert found == {}, "take what you need from the record's fields; only wording/ makes words"


def test_each_allowed_function_exists_and_still_parses_user_text() -> None:
    for (module, function), why in ALLOWED.items():
        tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert function in names, f"{module}: no function {function}; remove it from ALLOWED"
        finder = Finder()
        finder.visit(tree)
        assert any(f[0] == function for f in finder.found), f"{module}:{function} no longer cuts: remove it"
        assert why


# Modules that lay out, carry or find an outcome and leave its words to wording/.
WORDLESS = (
    "reconciler/cli/shown.py",
    "reconciler/daemon/events.py",
    "reconciler/daemon/forge.py",
    "reconciler/daemon/rollback.py",
    "reconciler/plan/planned.py",
    "reconciler/plan/text.py",
    "reconciler/plan/verify.py",
    "reconciler/prdiff/compare.py",
    "reconciler/prdiff/entry.py",
    "reconciler/prdiff/objects.py",
    "reconciler/status/refused.py",
)
SENTENCE = re.compile(r"[A-Za-z]{2,}[,:;)]?\s+\(?[A-Za-z]{2,}")


def sentences(source: str) -> list[tuple[int, str]]:
    """The strings of ``source`` that say something: two words or more, docstrings aside."""
    tree = ast.parse(source)
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
    }
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in n.values)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs | parts:
            text = n.value
        else:
            continue
        if SENTENCE.search(text):
            found.append((n.lineno, text))
    return sorted(found)


def test_modules_that_lay_out_or_carry_an_outcome_make_no_words() -> None:
    found = {m: sentences((ROOT / m).read_text(encoding="utf-8")) for m in WORDLESS}
    assert {m: hits for m, hits in found.items() if hits} == {}, "say it in wording/, records in, strings out"


SAYS = [
    'def created(c):\n    return f"new domain: defined (runStrategy {c.run_strategy})"\n',
    '_PRUNED = "left git: pruned (disks kept)"\n',
    'def line(c):\n    return f"{c.subject}: {c.action} - " + ("drift detected" if c.drift else "")\n',
    'def message(e):\n    return {"message": f"{e} would be deleted"}\n',
]
SAYS_NOTHING = [
    'def f(c):\n    """The layout: a docstring says what it does."""\n    return f"{c.a}+ {c.b}"\n',
    '_DETAIL = "      "\nKIND = "created"\nKEY = "would_prune"\n',
    'def f(a, b):\n    return f"{a}: {b}" + "\\n" + "; ".join([a, b])\n',
]


@pytest.mark.parametrize("source", SAYS)
def test_the_checker_finds_a_sentence(source: str) -> None:
    assert sentences(source) != []


@pytest.mark.parametrize("source", SAYS_NOTHING)
def test_the_checker_leaves_layout_and_keys_alone(source: str) -> None:
    assert sentences(source) == []


# The shapes this project had (and must not have again), and user input it must leave alone.
READS_BACK = [
    'def description(message):\n    return message.split("; ")[0].split("\\n")[0].strip()\n',
    "def first_error(message):\n    return message.split(';')[0]\n",
    'def failed(err):\n    text = str(err)\n    if text.startswith("commit "):\n        return text.split()[1]\n',
    'def key(err):\n    return "schedule" if "cron" in str(err) else "duration"\n',
    "import re\ndef sha(status):\n    return re.search(r'[0-9a-f]{12}', status.message)\n",
    "import re\nSHA = re.compile('x')\ndef sha(err):\n    return SHA.search(str(err))\n",
    'def held(h):\n    return h.status.message.partition("; ")[0]\n',
    'def cut(plan):\n    return "refused" in plan.prune_message\n',
]
LEAVES_ALONE = [
    'def parse_annotation(value):\n    return [p.strip() for p in str(value).split(";")]\n',  # ALLOWED
    "import re\ndef valid(v):\n    return re.fullmatch(r'[0-9a-f]{7,40}', v)\n",
    'def words(name):\n    return name.split(".")\n',
    "def ok(err):\n    return isinstance(err, ValueError) and err.commit\n",
    'def line(text):\n    return text.split("\\n")\n',
    'def join(messages):\n    return "; ".join(messages)\n',
]


@pytest.mark.parametrize("source", READS_BACK)
def test_the_checker_finds_a_message_read_back(source: str) -> None:
    assert readings(source, "reconciler/x.py") != []


@pytest.mark.parametrize("source", LEAVES_ALONE)
def test_the_checker_leaves_other_text_alone(source: str) -> None:
    assert readings(source, "reconciler/settings/windows.py") == []
