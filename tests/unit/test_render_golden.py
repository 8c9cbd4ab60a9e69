"""Golden files of the render stage: expanded VM YAML -> libvirt domain XML.

Covers, for every case under tests/data/render/<case>/ (``vm.yaml`` holds an
already expanded VirtualMachine, optional ``host.yaml`` a host config):
- the domain XML equals ``domain.xml`` byte for byte (``--regen-golden`` rewrites it);
- the volumes apply must provision equal ``volumes.txt``;
- the XML is valid per libvirt's schema (``virt-xml-validate``);
- rendering is deterministic (also under reordered mapping keys) and ``spec_hash``
  is the sha256 of the XML; it holds no ownership mark, and ``<metadata>`` only as a
  VM's pass-through keeps another application's;
- every field listed in docs/mapping.md appears in at least one case.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ruamel.yaml import YAML

from reconciler.config.host import load_host_config
from reconciler.model import ExpandedVM, Manifest, RenderedDomain
from reconciler.render import Draft, HostCaps, Placed, cputune, describe_volume, finish, mdev, render_draft
from reconciler.render.cloudinit import parse_payload, payload_secrets
from tests.helpers.domains import validate_xml

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from reconciler.settings.host import HostConfig

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "render"
CASES = sorted(p for p in DATA.iterdir() if (p / "vm.yaml").is_file())
MAPPING = ROOT / "docs" / "mapping.md"


def load_vm(path: Path) -> ExpandedVM:
    obj = YAML(typ="safe").load(path.read_text())
    return ExpandedVM(vm=obj, source=Manifest(obj, f"vms/{path.parent.name}.yaml", 1))


def host_for(case: Path) -> HostConfig:
    path = case / "host.yaml" if (case / "host.yaml").is_file() else DATA / "host.yaml"
    return load_host_config(path.read_bytes(), str(path.relative_to(ROOT)))


def placed(draft: Draft, host: HostConfig) -> RenderedDomain:
    """The draft as the only VM of its host gets its resources: the lowest dedicated CPUs,
    the first instances of its mediated device pools."""
    d = draft.domain
    cpus: tuple[int, ...] = ()
    uuids: tuple[str, ...] = ()
    if d.cpu_need is not None:
        cpus = cputune.place([(d.name, d.cpu_need)], host.dedicated_cpus, {}).cpus[d.name]
    if d.mdev_needs:
        uuids = mdev.place([(d.name, d.mdev_needs)], host.host_devices, {}).uuids[d.name]
    return finish(draft, Placed(cpus=cpus, mdevs=uuids) if draft.wants_placement else None)


def render_case(case: Path) -> RenderedDomain:
    """The domain as a host renders it, its host resources placed."""
    host = host_for(case)
    return placed(render_draft(load_vm(case / "vm.yaml"), host, HostCaps.default()), host)


def volumes_text(rendered: RenderedDomain) -> str:
    lines = [
        f"run_strategy={rendered.run_strategy} rollout={rendered.rollout} adopt={rendered.adopt} "
        f"prune={rendered.prune} grace_period_s={rendered.grace_period_s} hostname={rendered.hostname!r}"
    ]
    for vol in rendered.volumes:
        lines.append(describe_volume(vol))
        if vol.kind == "cloudinit-iso":
            label, files = parse_payload(vol.content)
            lines.append(f"  label {label}")
            for name, text in sorted(files.items()):
                lines.append(f"  {name}: {text!r}")
            for secret_dir in json.loads(vol.content).get("secretDirs") or ():
                lines.append(f"  every key <- Secret {secret_dir['secret']}")
            refs, ssh = payload_secrets(vol.content)
            for ref in refs:
                lines.append(f"  {ref['file']} <- Secret {ref['secret']} key {' or '.join(ref['keys'])}")
            if ssh:
                lines.append(
                    f"  {ssh['file']} += ssh_authorized_keys of Secret(s) {', '.join(ssh['secrets'])}"
                )
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_domain_xml(case: Path, golden: Callable[[Path, str], None]) -> None:
    rendered = render_case(case)
    golden(case / "domain.xml", rendered.xml)
    golden(case / "volumes.txt", volumes_text(rendered))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_is_schema_valid(case: Path, tmp_path: Path) -> None:
    validate_xml(render_case(case).xml, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_render_is_deterministic(case: Path) -> None:
    first, second = render_case(case), render_case(case)
    assert first.xml == second.xml
    assert first.spec_hash == second.spec_hash
    # The XML alone, unless the VM has generated ISOs: then their payload digests too.
    assert (first.spec_hash == hashlib.sha256(first.xml.encode()).hexdigest()) == (not first.config)
    # No ownership mark (the plan adds it); other applications' metadata only as a
    # pass-through keeps it.
    assert "http://reconciler.kubevirt.io/xmlns/domain" not in first.xml
    assert ("<metadata" in first.xml) == any(p.startswith("metadata/") for p in first.passthrough)


def _reversed_keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _reversed_keys(node[k]) for k in reversed(list(node))}
    if isinstance(node, list):
        return [_reversed_keys(x) for x in node]
    return node


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_render_ignores_mapping_key_order(case: Path) -> None:
    vm = load_vm(case / "vm.yaml")
    flipped = ExpandedVM(vm=_reversed_keys(vm.vm), source=vm.source)
    flipped_render = placed(render_draft(flipped, host_for(case), HostCaps.default()), host_for(case))
    assert flipped_render.xml == render_case(case).xml


def _paths(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            yield p
            yield from _paths(v, p)
    elif isinstance(node, list):
        for item in node:
            yield from _paths(item, prefix + "[]")


def mapped_fields() -> list[str]:
    """Field paths in the first column of docs/mapping.md's tables (`spec...` in backticks)."""
    fields = []
    for line in MAPPING.read_text().splitlines():
        m = re.match(r"^\|\s*`([^`]+)`", line)
        if m and (m.group(1).startswith("spec") or m.group(1).startswith("metadata")):
            fields.append(m.group(1))
    return fields


def test_mapping_lists_fields() -> None:
    assert len(mapped_fields()) > 60


@pytest.mark.parametrize("field", mapped_fields())
def test_every_mapped_field_has_a_golden_case(field: str) -> None:
    seen: set[str] = set()
    for case in CASES:
        seen.update(_paths(YAML(typ="safe").load((case / "vm.yaml").read_text())))
    assert field in seen, f"{field} is listed in docs/mapping.md but no golden case under {DATA} sets it"
