"""Domain XML and domains in tests: the field changes between two documents (no host),
libvirt's schema check, and the removal of a test's domains from a host.

Input: domain XML texts, or a hypervisor and domain names. Output: field changes;
an assertion when ``virt-xml-validate`` rejects a document. ``drop_domains`` changes
the host it is given (test cleanup); nothing else does I/O but the validator run.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING, Any

from reconciler.compare.changes import diff_essences
from reconciler.compare.essence import essence

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from reconciler.model.changes import FieldChange


def diff_domains(desired_xml: str, live_xml: str, running_xml: str = "") -> tuple[FieldChange, ...]:
    """Field changes from ``live_xml`` (a persistent definition, or an old rendering) to ``desired_xml``."""
    running = essence(running_xml) if running_xml else None
    return diff_essences(essence(desired_xml), essence(live_xml), running)


def validate_xml(xml: str, tmp_path: Path) -> None:
    tool = shutil.which("virt-xml-validate")
    assert tool, "virt-xml-validate (libvirt-clients) is required by the render tests"
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    proc = subprocess.run([tool, str(path), "domain"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def drop_domains(hv: Any, names: Iterable[str]) -> None:
    """Destroy and undefine the domains of ``names`` that exist (test cleanup)."""
    wanted = set(names)
    for d in hv.list_domains():
        if d.name in wanted:
            if d.active:
                hv.destroy(d.name)
            hv.undefine(d.name)
