"""Domains for plans on libvirt's test driver: a small test-driver domain's XML, its
rendered record, and the plan of the live domains under a prefix (shared by the
``tests/libvirt`` modules that plan and apply on ``test:///default``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.compare.cache import CompareCache
from reconciler.model import RunStrategy
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
from tests.helpers import plans

if TYPE_CHECKING:
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.model import RenderedDomain
    from reconciler.model.changes import Plan

PREFIX = "rtest-td-"


def xml(name: str, *, memory: int = 128, current: int | None = None, vcpus: int = 1, title: str = "") -> str:
    cur = current if current is not None else memory
    t = f"<title>{title}</title>" if title else ""
    return (
        f"<domain type='test'><name>{name}</name>{t}<memory unit='MiB'>{memory}</memory>"
        f"<currentMemory unit='MiB'>{cur}</currentMemory><vcpu current='{vcpus}'>2</vcpu>"
        "<os><type arch='i686'>hvm</type></os><devices>"
        "<disk type='file' device='disk'><source file='/guest/disk.img'/><target dev='vda' bus='virtio'/></disk>"
        "<interface type='network'><mac address='52:54:00:00:0a:01'/><source network='default'/></interface>"
        "</devices></domain>"
    )


def rendered(
    name: str, text: str, strategy: RunStrategy = RunStrategy.ALWAYS, **kw: object
) -> RenderedDomain:
    """``plans.rendered`` with a 1 s grace period (a test-driver guest stops at once)."""
    return plans.rendered(name, text, strategy, **{"grace_period_s": 1, **kw})


def plan_for(
    hv: Hypervisor, prefix: str, desired: list[RenderedDomain], rev: str = "c" * 40, **policy: Any
) -> Plan:
    live = [d for d in hv.list_domains() if d.name.startswith(prefix)]
    return build_plan(rev, desired, live, PlanPolicy(**policy), cache=CompareCache())
