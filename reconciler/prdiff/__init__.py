"""The PR diff: what merging one revision into another does to the VMs, with no host.

``compare`` builds both revisions and pairs their VMs (a ``PRDiff``), ``entry`` words
each VM's outcome; ``report`` renders it for a terminal, a PR comment or a tool. The
names below are the package's interface, used by the CLI and the tests.
"""

from reconciler.prdiff.compare import (
    SHORT_SHA,
    PRDiff,
    StatedPolicy,
    compare_desired,
    diff_snapshots,
)
from reconciler.prdiff.entry import NO_DOMAIN_CHANGE, EntryKind, VMEntry
from reconciler.prdiff.history import simulated_live
from reconciler.prdiff.report import (
    format_json,
    format_markdown,
    format_text,
    policy_line,
    summary_line,
    to_json_obj,
)

__all__ = [
    "NO_DOMAIN_CHANGE",
    "SHORT_SHA",
    "EntryKind",
    "PRDiff",
    "StatedPolicy",
    "VMEntry",
    "compare_desired",
    "diff_snapshots",
    "format_json",
    "format_markdown",
    "format_text",
    "policy_line",
    "simulated_live",
    "summary_line",
    "to_json_obj",
]
