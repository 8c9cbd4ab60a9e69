"""MAC addresses a VM does not name (reconciler/render/interfaces.py,
compare/definition.py, config/targets.py).

Covers: two unrelated repositories (two owners) give ``vm/web`` two MACs, one owner
always the same; the owner seeds them through the host target; a domain defined with
the MAC earlier versions derived (without the owner) keeps it: its plan is unchanged,
and the definition apply would write carries that MAC (also one seeded by the owner's
former name), while a new domain gets the
seeded one.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.catalog import build_catalog
from reconciler.compare.cache import CompareCache
from reconciler.config.daemon import DaemonConfig, HostEntry, Policy
from reconciler.config.targets import host_target
from reconciler.desired import desired_from_catalog
from reconciler.manifests import parse_documents
from reconciler.model.changes import Action
from reconciler.plan.build import build_plan
from reconciler.render import HostCaps
from reconciler.render.interfaces import stable_mac
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.source.settings import SourceConfig
from reconciler.wording.reasons import said
from tests.helpers.manifests import vm_yaml
from tests.helpers.plans import REV, live_of

if TYPE_CHECKING:
    from reconciler.model import RenderedDomain

OWNER_A, OWNER_B = "github.com/acme/vms#.", "git:" + "a" * 40 + "#."


def web(host: HostConfig) -> RenderedDomain:
    text = vm_yaml("web").encode()
    desired = desired_from_catalog(
        build_catalog(list(parse_documents(text, "vms/web.yaml"))),
        "r",
        lambda _p: text,
        host,
        HostCaps.default(),
    )
    (d,) = desired.rendered
    return d


def mac_of(xml: str) -> str:
    el = ET.fromstring(xml).find("devices/interface/mac")
    assert el is not None
    return el.get("address", "")


def test_two_owners_give_a_vm_two_macs() -> None:
    a, b = (web(HostConfig(mac_seed=o)) for o in (OWNER_A, OWNER_B))
    assert mac_of(a.xml) != mac_of(b.xml)
    assert (
        mac_of(a.xml)
        == mac_of(web(HostConfig(mac_seed=OWNER_A)).xml)
        == stable_mac("web", "default", OWNER_A)
    )
    config = DaemonConfig(SourceConfig("https://github.com/acme/vms"), policy=Policy(owner=OWNER_A))
    assert host_target(config, HostEntry("test:///default")).config.mac_seed == OWNER_A


def test_a_domain_keeps_the_mac_it_was_defined_with() -> None:
    before = web(HostConfig())  # as versions before owner-seeded MACs rendered it
    now = web(HostConfig(mac_seed=OWNER_A))
    assert mac_of(before.xml) == stable_mac("web", "default")
    live = dataclasses.replace(live_of(before), uuid="")
    policy = PlanPolicy(owner="")
    plan = build_plan(REV, [now], [live], policy, cache=CompareCache())
    (c,) = plan.changes
    assert not [f for f in c.fields if "interface" in f.path], c.fields
    assert c.action in (Action.UNCHANGED, Action.UPDATE), said(c)
    if c.definition is not None:
        assert mac_of(c.definition.xml) == mac_of(before.xml)
    (new,) = build_plan(REV, [now], [], policy, cache=CompareCache()).changes
    assert new.definition is not None
    assert mac_of(new.definition.xml) == stable_mac("web", "default", OWNER_A)


def test_a_renamed_owner_keeps_the_macs_of_its_domains() -> None:
    before = web(HostConfig(mac_seed=OWNER_B))  # defined under the owner's former name
    now = web(HostConfig(mac_seed=OWNER_A))
    assert mac_of(before.xml) != mac_of(now.xml)
    (c,) = build_plan(REV, [now], [live_of(before)], PlanPolicy(owner=""), cache=CompareCache()).changes
    assert not [f for f in c.fields if "interface" in f.path], c.fields
    if c.definition is not None:
        assert mac_of(c.definition.xml) == mac_of(before.xml)
