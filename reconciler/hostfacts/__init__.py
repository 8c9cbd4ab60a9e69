"""Host facts: what one libvirt host offers (``facts``) and whether a rendered domain
can run on it (``check``). Pure: nothing here opens a connection, a file or a clock.
"""

from reconciler.hostfacts.check import FactProblem, check_domain
from reconciler.hostfacts.facts import (
    FACTS_VERSION,
    FactsError,
    HostFacts,
    facts_from_json,
    facts_to_json,
    facts_to_obj,
    parse_host_facts,
    parse_node_devices,
    stable_view,
)

__all__ = [
    "FACTS_VERSION",
    "FactProblem",
    "FactsError",
    "HostFacts",
    "check_domain",
    "facts_from_json",
    "facts_to_json",
    "facts_to_obj",
    "parse_host_facts",
    "parse_node_devices",
    "stable_view",
]
