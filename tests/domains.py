"""Test helper: the field changes between two domain XML documents, with no host."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.compare.changes import diff_essences
from reconciler.compare.essence import essence

if TYPE_CHECKING:
    from reconciler.model import FieldChange


def diff_domains(desired_xml: str, live_xml: str, running_xml: str = "") -> tuple[FieldChange, ...]:
    """Field changes from ``live_xml`` (a persistent definition, or an old rendering) to ``desired_xml``."""
    running = essence(running_xml) if running_xml else None
    return diff_essences(essence(desired_xml), essence(live_xml), running)
