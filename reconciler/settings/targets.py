"""One libvirt host this process drives, as a record: its URI, host config and plan
policy (``config.targets`` resolves it from the configuration). Pure."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from reconciler.records import dataclass
from reconciler.settings.policy import PlanPolicy

if TYPE_CHECKING:
    from reconciler.settings.host import HostConfig


@dataclass(frozen=True, slots=True)
class HostTarget:
    """One libvirt host this process drives: its URI, host config and plan policy."""

    uri: str
    config: HostConfig
    policy: PlanPolicy = field(default_factory=PlanPolicy)
