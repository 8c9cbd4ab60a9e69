"""The per-VM series of ``/metrics`` that follow the status rows: each VM's sync state and
whether a restart is required, made from the rows when scraped; and a compact per-VM
gauge (``VMGauge``: ``reconciler_vm_ready``).

Input: each host's last status rows (the very tuple the host runner holds). Output: the
families ``reconciler_vm_sync`` (labels host, vm, sync; 1 for the VM's state) and
``reconciler_vm_restart_required`` (labels host, vm), as a prometheus-client collector.
Kept as the rows themselves, not as one client child per VM and family (~750 bytes
each, 1.5 MiB with 1000 VMs): a VM's series go with its row, and the state it left
with its old row. No I/O; it never decides anything.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from prometheus_client.metrics_core import Metric

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
    """A gauge with the labels host and vm, one plain number per VM (a prometheus-client
    child per VM holds ~500 bytes): ``labels(host, key).set(value)``, ``remove(host, key)``
    as the client's gauge, the VM named by its key (label ``vm``: the key's subject, made
    when scraped: the gauge holds the key the rows hold, no string of its own per VM).
    Set from the prober's thread and scraped from the listener's, under one lock."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name, self.documentation = name, documentation
        self._values: dict[str, dict[VMKey, int]] = {}
        self._lock = threading.Lock()

    def labels(self, host: str, vm: VMKey) -> _Setter:
        return _Setter(self, host, vm)

    def set(self, host: str, vm: VMKey, value: int) -> None:
        with self._lock:
            self._values.setdefault(host, {})[vm] = value

    def remove(self, host: str, vm: VMKey) -> None:
        with self._lock:
            del self._values.get(host, {})[vm]  # KeyError when it has no series, as the client's gauge

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation, labels=["host", "vm"])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=["host", "vm"])
        with self._lock:
            series = [
                (host, vm, value) for host, values in self._values.items() for vm, value in values.items()
            ]
        for host, vm, value in series:
            family.add_metric([host, vm.subject], value)
        yield family


class _Setter:
    __slots__ = ("gauge", "host", "vm")

    def __init__(self, gauge: VMGauge, host: str, vm: VMKey) -> None:
        self.gauge, self.host, self.vm = gauge, host, vm

    def set(self, value: float) -> None:
        self.gauge.set(self.host, self.vm, int(value))
