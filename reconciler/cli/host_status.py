"""What ``status`` shows: which hosts, their domains' rows, and the table or document.

Input: the ``--connect`` flag, the daemon's config (None: no file) and its state file's
mapping (``status.state``). Output: the hosts as (name, URI), the rows of their
domains with what the daemon recorded (``status.live_rows``; an unreachable host's
rows as recorded), and the status printed on stdout as a table with the daemon's
summary, or as JSON or YAML (``status.status_document``). Reads libvirt, changes
nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.cli.common import DEFAULT_URI, print_data

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.config.daemon import DaemonConfig
    from reconciler.model.results import VMStatus


def status_hosts(
    connect: str | None, cfg: DaemonConfig | None, state: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """The hosts ``status`` shows, (name, URI) each: ``--connect``, else the config
    file's, else those the daemon recorded, else the demo driver."""
    from reconciler.status import state as state_store

    if connect:
        return [(state_store.host_name_for(connect, cfg, state), connect)]
    if cfg is not None:
        return [(h.config.name, h.uri) for h in cfg.hosts]
    if state.get("hosts"):
        return [(name, str(h.get("uri", ""))) for name, h in sorted(state["hosts"].items())]
    return [("", DEFAULT_URI)]


def status_rows(
    hosts: Sequence[tuple[str, str]], state: Mapping[str, Any], show_all: bool
) -> tuple[list[VMStatus], list[str]]:
    """The rows of the hosts' domains with what the daemon recorded of them, and the
    hosts that could not be reached (their rows as recorded)."""
    from reconciler.errors import HypervisorError
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.status import live_rows
    from reconciler.status import state as state_store

    recorded = state.get("vms", [])
    rows: list[VMStatus] = []
    unreachable = []
    for name, uri in hosts:
        try:
            with Hypervisor(uri) as hv:
                host = name or hv.hostname()
                owner = str(state_store.host_state(state, name or host).get("owner", ""))
                rows.extend(live_rows(recorded, hv.list_domains(), host, show_all, owner))
        except HypervisorError as err:
            unreachable.append(f"{uri}: {err}")
            rows.extend(live_rows(recorded, None, name or uri))
    return rows, unreachable


def print_status(
    output: str,
    state: Mapping[str, Any],
    hosts: Sequence[tuple[str, str]],
    rows: Sequence[VMStatus],
    unreachable: Sequence[str],
) -> None:
    """The status as a table with the daemon's summary, or as a JSON or YAML document."""
    import json

    from reconciler.status import status_document, summary_lines
    from reconciler.status.table import format_table

    if output in ("json", "yaml"):
        out = status_document(state, rows, unreachable)
        if output == "yaml":
            print_data(out, "yaml")
        else:
            print(json.dumps(out, indent=2, sort_keys=True))
        return
    from reconciler.config import targets

    print("status: " + ", ".join(f"host {name or '?'} at {uri}" for name, uri in hosts))
    for _, uri in hosts:
        if targets.in_memory(uri):
            print(f"  note: {uri} is {targets.TEST_DRIVER_NOTE}: it shows no daemon's domains")
    print(format_table(rows))
    lines = summary_lines(state) + [f"unreachable: {u}" for u in unreachable]
    if lines:
        print()
        print("\n".join(lines))
