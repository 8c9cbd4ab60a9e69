"""Records of the model built by hand for pure tests: a status row, a rendered domain.

Output: ``row`` (a ``VMStatus``) and ``rendered`` (a halted ``RenderedDomain`` of the test
driver). Pure.
"""

from __future__ import annotations

import hashlib

from reconciler.model import RenderedDomain, RunStrategy, VMKey
from reconciler.model.results import Sync, VMStatus

A = "a" * 40


def row(name: str, host: str = "h1", sync: Sync = Sync.SYNCED) -> VMStatus:
    return VMStatus(VMKey.from_domain(name), host, "Always", "running", sync, A[:12], False, "")


def rendered(name: str) -> RenderedDomain:
    xml = f"<domain type='test'><name>{name}</name><memory unit='KiB'>65536</memory><os><type>hvm</type></os></domain>"
    return RenderedDomain(
        key=VMKey.from_domain(name),
        uuid="",
        xml_data=xml,
        spec_hash=hashlib.sha256(xml.encode()).hexdigest(),
        run_strategy=RunStrategy.HALTED,
        source_path=f"vms/{name}.yaml",
    )
