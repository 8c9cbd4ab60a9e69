"""What ``apply FILE`` finds a saved plan claims that this host does not plan, in words.

Input: the values ``plan.verify`` found, each already made printable where it comes from
the file (the VM, its paths, keys, elements, images and digests), and the revision.
Output: one line per difference, naming the VM (or the part of the plan) and what
differs. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

A_CHANGE = "a change"  # a change of the file that names no domain
ALL = "all"  # every key of a record the file holds as something else
ITS_RECORDS = "its records"  # a rendered domain that differs in its records, not its XML
HOST_CONFIG = "the host config"
POLICY = "the policy"
NOT_XML = "not XML"  # a domain's XML record that does not parse, where its elements are named
FORMATTING = "formatting"  # two domain XML documents equal but for how they are written


def outside_allowed(who: str, paths: str, allowed: Sequence[str]) -> str:
    return f"{who}: {paths}: outside this host's allowedDirectories ({', '.join(allowed)})"


def not_this_hosts(what: str, keys: Sequence[str]) -> str:
    """The host config or policy the plan was made with is not this host's (its keys that differ)."""
    return f"{what} it was planned with is not this host's: {', '.join(keys)} differ"


def plan_key(key: str, revision: str) -> str:
    return f"the plan's {key} is not what revision {revision} plans for this host"


def entry_key(key: str) -> str:
    return f"the plan's {key} is not this host's"


def no_fingerprint(who: str) -> str:
    return f"{who}: the plan touches it and holds no fingerprint of it"


def stray_fingerprint(who: str) -> str:
    return f"{who}: the plan holds a fingerprint of a domain it does not touch"


def host_moved(who: str) -> str:
    return f"{who}: the host no longer matches the plan"


def not_planned(who: str, action: str, revision: str) -> str:
    return f"{who}: the plan's {action} is not in what revision {revision} plans"


def missing_change(who: str, revision: str, action: str) -> str:
    return f"{who}: revision {revision} plans {action} for it; the plan holds no change for it"


def rendered_differs(who: str, key: str, revision: str, named: Sequence[str]) -> str:
    """A domain's XML record that differs, named by its elements (or ``ITS_RECORDS``)."""
    return f"{who}: its {key} is not what revision {revision} renders for this host: {', '.join(named) or ITS_RECORDS}"


def change_differs(who: str, key: str, revision: str) -> str:
    return f"{who}: its {key} is not what revision {revision} plans for this host"


def stale_image(who: str, image: str, planned: str, now: str) -> str:
    """An image the plan names by a digest this host now resolves to another (``""``: a local file)."""
    return (
        f"{who}: image {image} was planned as {planned or 'a local file'}, "
        f"this host now resolves it to {now or 'a local file'} (a stale plan)"
    )
