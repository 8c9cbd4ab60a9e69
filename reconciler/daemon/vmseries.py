"""The per-VM series of ``/metrics`` that follow the status rows: each VM's sync state and
whether a restart is required, made from the rows when scraped; and a compact per-VM
gauge read from the prober's readiness snapshot when scraped (``VMGauge``:
``reconciler_vm_ready``).

Input: each host's last status rows (the very tuple the host runner holds). Output: the
families ``reconciler_vm_sync`` (labels host, vm, sync; 1 for the VM's state) and
``reconciler_vm_restart_required`` (labels host, vm), as a prometheus-client collector.
Kept as the rows themselves, not as one client child per VM and family (~750 bytes
each, 1.5 MiB with 1000 VMs): a VM's series go with its row, and the state it left
with its old row. No I/O; it never decides anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from prometheus_client.metrics_core import Metric

    from reconciler.model.health import Readiness
    from reconciler.model.keys import VMKey
    from reconciler.model.results import VMStatus

SYNC = ("reconciler_vm_sync", "1 for the VM's sync state (Synced, OutOfSync, Failed, CrashLoopBackOff, ...)")
RESTART = (
    "reconciler_vm_restart_required",
    "1 while a restart-class change waits for the VM's next cold boot",
)


class VMSeries(Collector):
    """Each host's rows, by host (``observe``); a host forgotten takes its series along."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[VMStatus, ...]] = {}

    def observe(self, host: str, rows: Iterable[VMStatus]) -> set[str]:
        """The host's rows now; returns the VMs its last rows listed and these do not."""
        before = self._rows.get(host, ())
        now = self._rows[host] = rows if isinstance(rows, tuple) else tuple(rows)
        return {r.name for r in before} - {r.name for r in now}

    def forget(self, host: str) -> None:
        self._rows.pop(host, None)

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(*SYNC, labels=["host", "vm", "sync"])
        yield GaugeMetricFamily(*RESTART, labels=["host", "vm"])

    def collect(self) -> Iterator[Metric]:
        sync = GaugeMetricFamily(*SYNC, labels=["host", "vm", "sync"])
        restart = GaugeMetricFamily(*RESTART, labels=["host", "vm"])
        for host, rows in list(self._rows.items()):
            for name, row in {r.name: r for r in rows}.items():  # one series per VM: its last row
                sync.add_metric([host, name, str(row.sync)], 1)
                restart.add_metric([host, name], int(row.restart_required))
        yield sync
        yield restart


class VMGauge(Collector):
    """A gauge with the labels host and vm, one series per VM, read when scraped from its
    source (``follow``: each host and its VMs' ``Readiness``, the prober's snapshot): the
    value 1 for a VM Ready, else 0, the VM named by its key's subject. It holds nothing per
    VM (a prometheus-client child per VM holds ~500 bytes, a table of its own ~40 bytes):
    a VM's series is there while the prober watches it. The snapshot is frozen, so a
    scrape from the listener's thread needs no lock."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name, self.documentation = name, documentation
        self._source: Callable[[], Iterable[tuple[str, Mapping[VMKey, Readiness]]]] = tuple

    def follow(self, source: Callable[[], Iterable[tuple[str, Mapping[VMKey, Readiness]]]]) -> None:
        self._source = source

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation, labels=["host", "vm"])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=["host", "vm"])
        for host, ready in self._source():
            for vm, r in ready.items():
                family.add_metric([host, vm.subject], int(r.ready))
        yield family
