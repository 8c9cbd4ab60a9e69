"""A problem as a record: what is wrong, where, with what, how bad, and whether it passes.

Input: nothing. Output: the ``Problem`` type. Pure. Every stage reports errors and
warnings as ``Problem`` records; only the edges (the CLI, the PR report, status and the
daemon's log) turn them into words (``reconciler.wording.problems``), so no stage reads
another's message back.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from reconciler.records import dataclass

if TYPE_CHECKING:
    from reconciler.model.keys import VMKey


class Notice(enum.StrEnum):
    """What a warning says will not happen, for those a plan must never leave unsaid:
    counted by kind in metrics and shown per VM in status."""

    PINNED_REVISION = "pinned-revision"  # git holds a newer instancetype/preference than the VM runs
    DISK_NOT_RESIZED = "disk-not-resized"  # git asks another size of a disk that already exists


class Severity(enum.StrEnum):
    ERROR = "error"  # the revision (or this VM) cannot be applied
    WARNING = "warning"  # applied, but someone should look


@dataclass(frozen=True, slots=True)
class Problem:
    """One error or warning.

    ``message`` is the cause alone: no location, no subject, no field (those are fields
    of their own), so equal causes of many VMs compare equal and group. ``subject`` names
    what the problem is about when it is not a VM (``host h1``, ``Secret default/db``).
    """

    message: str
    vm: VMKey | None = None
    subject: str = ""
    path: str = ""  # repository file, relative to the root
    line: int = 0  # 1-based; 0: unknown
    column: int = 0  # 1-based; 0: unknown
    field: str = ""  # KubeVirt field path, e.g. spec.template.spec.domain.cpu.cores
    severity: Severity = Severity.ERROR
    transient: bool = False  # goes away by itself (a host unreachable); retried
    notice: Notice | None = None  # a warning of a kind metrics count and status shows per VM

    @property
    def who(self) -> str:
        """The subject as shown: the VM's ``vm/<domain>``, else ``subject``."""
        return self.vm.subject if self.vm is not None else self.subject

    @property
    def is_error(self) -> bool:
        return self.severity == Severity.ERROR
