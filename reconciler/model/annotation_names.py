"""The VM annotations the reconciler reads: their names, in one place.

Input: nothing. Output: the names under ``reconciler.kubevirt.io/`` and the set of them
(``KNOWN``), which the catalog checks every object against (an unknown name under the
prefix is an error with a did-you-mean). Pure. These are load-bearing names
(docs/architecture.md): renaming one silently changes what a repository means.
"""

from __future__ import annotations

PREFIX = "reconciler.kubevirt.io/"

ROLLOUT = PREFIX + "rollout"  # Stage | Restart: restart-class changes of a running VM
ADOPT = PREFIX + "adopt"  # "true": take over an existing domain of the VM's name
PRUNE = PREFIX + "prune"  # "false": never prune this VM's domain
RESTART_WINDOW = PREFIX + "restart-window"  # "SCHEDULE; DURATION[; TZ]" or "now"
# "true": the VM takes the repository's instancetype and preference revisions, not the
# ones captured on its domain (a pinned VM rolled forward; remove it to pin again)
ROLL_FORWARD = PREFIX + "roll-forward"

# A count or percentage: the VM is paced with the VMs of the same limit instead of the
# host's policy.maxUnavailable (plan/pace.py)
MAX_UNAVAILABLE = PREFIX + "max-unavailable"
# Set by the catalog on a VirtualMachinePool's replicas: the pool's pacing (JSON: pool,
# replicas, maxUnavailable, updateStrategy, the replica's place in selectionPolicy order)
POOL = PREFIX + "pool"

# On the VM's template: a <domain> fragment merged into the rendered domain (docs/passthrough.md)
DOMAIN_XML_PASSTHROUGH = PREFIX + "domain-xml-passthrough"

KNOWN = frozenset(
    {ROLLOUT, ADOPT, PRUNE, RESTART_WINDOW, ROLL_FORWARD, DOMAIN_XML_PASSTHROUGH, MAX_UNAVAILABLE, POOL}
)
