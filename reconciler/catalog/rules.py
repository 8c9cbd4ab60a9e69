"""The vocabulary of KubeVirt's admission table: a rule, what we do about it, where
KubeVirt keeps it.

Input: nothing. Output: ``Rule`` (one row: id, area, KubeVirt source file, what
KubeVirt refuses, what we do, where we do it), ``Ours`` (the same refusal, a warning, a
refusal of our own, not applicable) and the KubeVirt source directories the rows cite.
The rows live in ``catalog.machine_rules`` and ``catalog.device_rules``; the table and
its checks in ``catalog.admission``. Pure data: never reads files.
"""

from __future__ import annotations

import enum

from reconciler.model.devices import KINDS
from reconciler.records import dataclass


class Ours(enum.StrEnum):
    SAME = "same refusal"
    WARN = "warning"  # a libvirt host honours what KubeVirt refuses
    UNSUPPORTED = "refused here"  # KubeVirt accepts it, a libvirt host cannot do it
    NA = "not applicable"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    area: str
    source: str  # KubeVirt file (below pkg/) holding the rule
    kubevirt: str  # what KubeVirt refuses
    ours: Ours
    where: str  # which of our stages enforces it, or why it does not apply


ADM = "virt-api/webhooks/validating-webhook/admitters/"
VMI = ADM + "vmi-create-admitter.go"
NET = "network/admitter/"


def rendered_by(element: str, also: str = "") -> str:
    """Where a rule about a device kind is enforced: the kind's render module (its
    descriptor in ``model.devices``, whose ``admission`` names the rule), then ``also``."""
    return KINDS[element].module + also
