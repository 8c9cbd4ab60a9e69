"""Listing a host's domains: states and persistence read for the whole host at once give
what asking each domain gives (running, shut off, paused, transient)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator

PREFIX = "rtest-list-"


def xml(name: str) -> str:
    return (
        f"<domain type='test'><name>{PREFIX}{name}</name><memory unit='MiB'>64</memory>"
        "<os><type arch='i686'>hvm</type></os></domain>"
    )


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor("test:///default") as h:
        conn = h._conn
        conn.defineXML(xml("off"))
        conn.defineXML(xml("on")).create()
        paused = conn.defineXML(xml("paused"))
        paused.create()
        paused.suspend()
        conn.createXML(xml("transient"), 0)
        try:
            yield h
        finally:
            h.destroy(f"{PREFIX}transient")  # a transient domain is gone once destroyed
            drop_domains(h, [f"{PREFIX}{n}" for n in ("off", "on", "paused")])


def ours(h: Hypervisor) -> dict[str, tuple[PowerState, bool, str, bool, str]]:
    return {
        d.name.removeprefix(PREFIX): (
            d.state,
            d.persistent,
            d.state_reason,
            bool(d.live_xml),
            d.persistent_xml,
        )
        for d in h.list_domains()
        if d.name.startswith(PREFIX)
    }


def test_one_call_for_all_states_reads_what_each_domain_says(
    hv: Hypervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    batched = ours(hv)
    assert {n: (s, p, live) for n, (s, p, _, live, _) in batched.items()} == {
        "off": (PowerState.SHUTOFF, True, False),
        "on": (PowerState.RUNNING, True, True),
        "paused": (PowerState.PAUSED, True, True),
        "transient": (PowerState.RUNNING, False, True),
    }

    def unsupported(*_: object) -> None:
        raise hv._libvirt.libvirtError("this driver cannot list stats")

    monkeypatch.setattr(hv._conn, "getAllDomainStats", unsupported)
    assert ours(hv) == batched  # each domain asked on its own: the same answers


def test_the_in_process_test_driver_is_read_one_domain_after_another() -> None:
    from reconciler.host import connection

    names = [f"{PREFIX}serial-{i:03d}" for i in range(connection.PARALLEL_MIN + 1)]
    with Hypervisor("test:///default") as h:
        try:
            for name in names:
                h._conn.defineXML(xml(name.removeprefix(PREFIX)))
            real = h._live
            readers: set[str] = set()

            def recorded(dom: object, *args: object) -> object:
                readers.add(threading.current_thread().name)
                return real(dom, *args)  # type: ignore[arg-type]

            h._live = recorded  # type: ignore[method-assign,assignment]
            assert {d.name for d in h.list_domains()} >= set(names)
            assert readers == {
                threading.current_thread().name
            }  # threads would only contend for the driver's lock
        finally:
            drop_domains(h, names)
