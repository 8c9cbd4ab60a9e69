"""The recipes of docs/architecture.md ("Where to add"), followed.

Covers: every file a recipe names exists and every name it gives is found in the files
its bullet names; no module keeps a list of device kinds of its own (a tuple, list,
set or mapping naming two kinds: the descriptors of ``model.devices`` are the one
list); a kind added to the descriptor table reaches the hotplug ports, KubeVirt's PCI
count and seals, and a running domain's spare slots without another edit; every kind
of the table is taken by each consumer the recipe says follows from it (render's
accepted keys, the importer's readers in the table's order, the pass-through
allowlist, KubeVirt's admission table, the host facts).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import MappingProxyType

import pytest

from reconciler.catalog.admission import RULE_BY_ID, RULES
from reconciler.compare import capacity
from reconciler.hostfacts.facts import HostFacts
from reconciler.importer import devices as importer_devices
from reconciler.importer.reading import DomainRead
from reconciler.model import devices as dev
from reconciler.model import pci as on_pci
from reconciler.render import allowlist, ports
from reconciler.render.devices import DEVICE_KEYS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


# -- the recipes' words ----------------------------------------------------------------


def _bullets() -> dict[str, str]:
    text = ARCHITECTURE.read_text()
    section = text.split("\n## Where to add\n", 1)[1].split("\n## ", 1)[0]
    out: dict[str, str] = {}
    for bullet in re.split(r"\n(?=- \*\*)", section.strip()):
        title = re.match(r"- \*\*(.+?)\*\*", bullet)
        assert title is not None, bullet[:60]
        out[title.group(1)] = bullet
    return out


def _resolve(token: str) -> Path | None:
    """A path a recipe gives: below ``reconciler/`` or the repository's root."""
    for base in (PACKAGE, ROOT):
        path = base / token
        if path.exists():
            return path
    return None


_PATH = re.compile(r"^[\w.-]+(/[\w.<>-]*)*\.(py|md|json|toml)$|^[\w-]+(/[\w-]+)*/$")
_NAME = re.compile(r"^_?[A-Za-z][A-Za-z0-9_]*$")


def test_the_recipes_are_there() -> None:
    assert {"A kustomize transformer", "A libvirt device kind", "A host fact"} <= set(_bullets())


@pytest.mark.parametrize("title", sorted(_bullets()))
def test_every_file_and_name_a_recipe_gives_exists(title: str) -> None:
    bullet = _bullets()[title]
    tokens = re.findall(r"`([^`]+)`", bullet)
    files: list[Path] = []
    for token in tokens:
        if _PATH.match(token) and "<" not in token:
            path = _resolve(token)
            if path is None and not token.endswith("/") and "/" not in token:
                continue  # a module named below a directory the bullet gives (`devices.py`)
            assert path is not None, f"{title}: {token} names no file of the repository"
            files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    files += [PACKAGE / "cli/repo_args.py", PACKAGE / "cli/host_args.py"]  # the commands it names
    sources = "\n".join(f.read_text() for f in files if f.suffix == ".py" and PACKAGE in f.parents)
    for token in tokens:
        name = token.split("(", 1)[0]
        if _NAME.match(name) and not _PATH.match(token):
            assert re.search(rf"\b{re.escape(name)}\b", sources), f"{title}: {name} is in none of its files"
    for module in re.findall(r"python -m (reconciler(?:\.\w+)+)", bullet):
        assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module


def test_the_device_kind_recipe_names_every_module_that_reads_the_descriptors() -> None:
    """Every module of the package importing ``model.devices`` is named by the recipe."""
    bullet = _bullets()["A libvirt device kind"]
    named = set(re.findall(r"`([^`]+\.py)`", bullet))
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        if re.search(r"^from reconciler\.model(\.devices| import devices)\b", path.read_text(), re.M):
            readers.add(str(path.relative_to(PACKAGE)))
    readers -= {"model/devices.py", "model/xmlpaths.py"}  # the table; paths in an essence
    assert readers <= named, f"not in the recipe: {sorted(readers - named)}"


# -- one list of kinds -----------------------------------------------------------------

# Collections naming two or more kinds that are no list of device kinds.
NOT_KIND_LISTS = {
    ("reconciler/render/disks.py", "DISK_KEYS"),  # a KubeVirt disk's fields ("disk", "serial")
    ("reconciler/importer/devices.py", "READERS"),  # the readers, checked against the table below
}


def _kind_lists_in(rel: str, source: str) -> list[str]:
    """The collections of ``source`` naming two device kinds or more."""
    tree = ast.parse(source)
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and (rel, t.id) in NOT_KIND_LISTS for t in targets):
                exempt.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        kinds = [e.value for e in items if isinstance(e, ast.Constant) and e.value in dev.KINDS]
        if len(kinds) >= 2:
            found.append(f"{rel}:{node.lineno}: {kinds}")
    return found


def test_no_module_keeps_a_list_of_device_kinds_of_its_own() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel != "reconciler/model/devices.py":
            found += _kind_lists_in(rel, path.read_text())
    assert found == []


def test_a_list_of_kinds_of_its_own_is_caught() -> None:
    # compare/capacity.py as it was before the descriptors said which kinds take a slot
    before = 'def _needs_slot(kind):\n    return kind in ("interface", "hostdev", "rng")\n'
    assert _kind_lists_in("reconciler/compare/capacity.py", before) == [
        "reconciler/compare/capacity.py:2: ['interface', 'hostdev', 'rng']"
    ]
    # a mapping keyed by kinds is a list too, unless it is one the table is checked against
    readers = 'READERS = {"disk": read_disks, "rng": read_rng}\n'
    assert _kind_lists_in("reconciler/importer/other.py", readers) != []
    assert _kind_lists_in("reconciler/importer/devices.py", readers) == []


# -- a new kind, declared in the table -------------------------------------------------

NEW = dev.DeviceKind("pstore", pci=on_pci.RNG)


@pytest.fixture
def with_new_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = MappingProxyType({**dev.KINDS, NEW.element: NEW})
    for module in (ports, capacity):
        monkeypatch.setattr(module, "KINDS", kinds)


def _devices(*extra: str) -> ET.Element:
    return ET.fromstring(
        "<devices><controller type='usb' index='0' model='qemu-xhci'/><memballoon model='none'/>"
        + "".join(extra)
        + "</devices>"
    )


@pytest.mark.usefixtures("with_new_kind")
def test_a_new_kind_in_the_table_takes_its_root_port_and_its_slot() -> None:
    base = _devices()
    new = _devices("<pstore backend='acpi-erst'/>")
    assert ports.ports_in_use(new) == ports.ports_in_use(base) + 1
    assert ports.kubevirt_pci_devices(new, {}) == ports.kubevirt_pci_devices(base, {}) + 1
    placed = _devices("<pstore><address type='pci' bus='0x05' slot='0'/></pstore>")
    assert ports.sealed_buses(placed) == {5}
    assert capacity._needs_slot({"devices/pstore@backend": "acpi-erst"}, "devices/pstore")


def test_without_its_row_the_kind_takes_nothing() -> None:
    new = _devices("<pstore backend='acpi-erst'/>")
    assert ports.ports_in_use(new) == ports.ports_in_use(_devices())
    assert not capacity._needs_slot({"devices/pstore@backend": "acpi-erst"}, "devices/pstore")


# -- every kind, every consumer --------------------------------------------------------


def test_render_accepts_the_keys_each_kind_is_written_from() -> None:
    keys = {key for k in dev.DEVICE_KINDS for key in k.spec}
    assert set(DEVICE_KEYS) == keys | {"useVirtioTransitional"}
    assert all(k.rendered for k in dev.DEVICE_KINDS if k.spec)


def test_the_importer_reads_every_kind_render_writes_in_the_order_of_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert set(importer_devices.READERS) == {k.element for k in dev.DEVICE_KINDS if k.rendered}
    xml = ET.fromstring("<devices><rng model='virtio'/><vsock model='virtio'/></devices>")
    assert set(importer_devices.read_devices(xml, "default", DomainRead()).devices) >= {
        "rng",
        "autoattachVSOCK",
    }
    monkeypatch.setattr(importer_devices, "DEVICE_KINDS", (dev.KINDS["rng"],))
    assert importer_devices.read_devices(xml, "default", DomainRead()).devices == {"rng": {}}


@pytest.mark.parametrize("kind", dev.DEVICE_KINDS, ids=lambda k: k.element)
def test_the_allowlist_takes_what_a_pass_through_may_do_from_the_descriptor(kind: dev.DeviceKind) -> None:
    rule = allowlist.RULES.get(f"devices/{kind.element}")
    if kind.passthrough in (dev.ADD, dev.MERGE):
        assert rule is not None, f"devices/{kind.element}: no row in the allowlist"
        assert rule.add == (kind.passthrough == dev.ADD)
    else:
        assert kind.passthrough == ""
        assert rule is None
    assert allowlist.REFUSED.get(f"devices/{kind.element}", "") == kind.refused


@pytest.mark.parametrize("kind", dev.DEVICE_KINDS, ids=lambda k: k.element)
def test_the_admission_rows_of_a_kind_say_its_render_module_enforces_them(kind: dev.DeviceKind) -> None:
    for rule_id in kind.admission:
        assert rule_id in RULE_BY_ID, rule_id
        assert RULE_BY_ID[rule_id].where.startswith(kind.module), rule_id


def test_every_admission_row_a_device_module_enforces_is_a_kinds() -> None:
    modules = {k.module for k in dev.DEVICE_KINDS if k.rendered} - {"render/__init__.py"}
    named = {rule_id for k in dev.DEVICE_KINDS for rule_id in k.admission}
    for rule in RULES:
        if any(rule.where.startswith(m) for m in modules):
            assert rule.id in named, f"{rule.id}: enforced by {rule.where}, named by no kind's admission"


@pytest.mark.parametrize("kind", [k for k in dev.DEVICE_KINDS if k.facts], ids=lambda k: k.element)
def test_the_host_facts_of_a_kind_are_checked(kind: dev.DeviceKind) -> None:
    fields = {f.name for f in dataclasses.fields(HostFacts)}
    checks = (PACKAGE / "hostfacts/check.py").read_text() + (PACKAGE / "render/placement.py").read_text()
    for fact in kind.facts:
        assert fact in fields, fact
        assert f"facts.{fact}" in checks, f"{kind.element}: {fact} is checked nowhere"
