"""libvirt's own domain XML (its qemuxml2xml output, pinned) through ``reconciler import``.

Covers: every x86 file of ``tests/data/libvirt-qemuxml2xml`` (libvirt 9.0.0's test data,
LGPL-2.1-or-later, see its SOURCE.txt) taken as a stopped domain's definition (renamed
to a KubeVirt name first) is imported or left out with named reasons, without a
pass-through and with one; no import succeeds where the plan would change or drop
something: each imported repository is built as ``plan`` builds it (kustomization,
catalog, expansion, rendering with the host config written beside it), planned against
that XML as ``adopt`` with no changed field, its final definition (addresses and
libvirt's own controllers carried over) loses no value of the file and passes libvirt's
schema; the pass-through of each is valid KubeVirt YAML. The shares are figures
(``bench/import-xml``), not assertions.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reconciler import overlays
from reconciler.catalog import build_catalog
from reconciler.compare.essence import carry_addresses
from reconciler.config.host import load_host_config
from reconciler.desired import desired_from_catalog
from reconciler.hostfacts import HostFacts
from reconciler.importer import import_domains
from reconciler.importer.domain import vm_name
from reconciler.importer.verify import dropped
from reconciler.model import LiveDomain, PowerState
from reconciler.model.changes import Action
from reconciler.overlays.cache import OverlayCache
from reconciler.plan.build import build_plan
from reconciler.render import HostCaps
from reconciler.settings.policy import PlanPolicy
from reconciler.source.files import DirView
from reconciler.wording.reasons import said
from tests.helpers.domains import validate_xml

DATA = Path(__file__).resolve().parents[1] / "data" / "libvirt-qemuxml2xml"
FILES = sorted(DATA.glob("*.xml"))


def _live(path: Path) -> LiveDomain:
    text = path.read_text()
    old = ET.fromstring(text).findtext("name") or ""
    new = vm_name(old)[1]
    return LiveDomain(
        new, "", PowerState.SHUTOFF, text.replace(f"<name>{old}</name>", f"<name>{new}</name>", 1)
    )


def test_the_pinned_data_is_libvirts_x86_subset() -> None:
    assert len(FILES) == 497
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in (DATA / "COPYING.LESSER").read_text()
    assert "libvirt_9.0.0.orig.tar.xz" in (DATA / "SOURCE.txt").read_text()
    for path in FILES:
        dom = ET.fromstring(path.read_text())
        arch = dom.find("os/type")
        assert path.name.endswith(".x86_64-latest.xml") or (
            arch is not None and arch.get("arch") in ("x86_64", "i686")
        ), path.name


@pytest.mark.parametrize("keep", [False, True], ids=["without-passthrough", "with-passthrough"])
def test_no_import_succeeds_where_the_plan_would_change_or_drop_something(keep: bool, tmp_path: Path) -> None:
    imported = 0
    for path in FILES:
        live = _live(path)
        result = import_domains([live], [live.name], frozenset(), lambda _i, _d: HostFacts(), "h", keep=keep)
        (outcome,) = result.outcomes
        if outcome.status != "imported":
            assert outcome.reasons, path.name  # never left out in silence
            continue
        imported += 1
        repo = tmp_path / path.stem
        for rel, text in result.files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        manifests = overlays.build(DirView(repo), ".", cache=OverlayCache())
        host = load_host_config((repo / result.host_config_path).read_bytes(), result.host_config_path)
        desired = desired_from_catalog(
            build_catalog(list(manifests)),
            "r",
            DirView(repo).read,
            host,
            HostCaps.default(),
        )
        assert desired.errors == (), path.name
        (rendered,) = desired.rendered
        (change,) = build_plan("r", [rendered], [live], PlanPolicy()).changes
        assert change.action == Action.ADOPT, (path.name, said(change))
        assert (change.fields, change.start, change.stop, change.live_ops) == ((), False, False, ()), (
            path.name
        )
        final = carry_addresses(rendered.xml, live.persistent_xml)
        assert dropped(final, live.persistent_xml) == (), path.name
        validate_xml(final, tmp_path)
    assert imported > 0 or not keep  # the figures themselves: bench/import-xml
