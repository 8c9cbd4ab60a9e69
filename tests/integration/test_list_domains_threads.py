"""Listing many domains of a host served by libvirtd: the XML reads go out over several
threads, with exactly the answers of reading one domain after another; a failed read is
reported as ours, once every read has ended, and the connection still serves."""

from __future__ import annotations

import threading

import pytest

from reconciler.errors import HypervisorError
from reconciler.host import connection
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.domains import drop_domains

PREFIX = "rtest-threads-"
URI = "test+unix:///default"  # the test driver behind libvirtd's socket, as a real host is reached


def xml(name: str, mib: int) -> str:
    return (
        f"<domain type='test'><name>{name}</name><memory unit='MiB'>{mib}</memory>"
        "<os><type arch='i686'>hvm</type></os></domain>"
    )


def test_many_domains_are_read_over_threads_with_the_answers_of_one_by_one(
    qemu_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 2 * connection.PARALLEL_MIN + 7
    names = [f"{PREFIX}{i:03d}" for i in range(n)]
    with Hypervisor(URI) as h:
        try:
            for i, name in enumerate(names):
                dom = h._conn.defineXML(xml(name, 64 + i))
                if i % 3:
                    dom.create()
            real = h._live
            readers: set[str] = set()

            def recorded(dom: object, *args: object) -> object:
                readers.add(threading.current_thread().name)
                return real(dom, *args)  # type: ignore[arg-type]

            monkeypatch.setattr(h, "_live", recorded)
            threaded = [d for d in h.list_domains() if d.name in names]
            monkeypatch.undo()
            assert len(readers) > 1  # the reads went out over several threads...
            assert all(r.startswith("libvirt-read") for r in readers)
            assert not [t for t in threading.enumerate() if t.name.startswith("libvirt-read")]  # ...ended
            assert sorted(d.name for d in threaded) == names
            for d in threaded:  # each domain's own definitions, not a neighbour's
                i = names.index(d.name)
                assert f"<name>{names[i]}</name>" in d.persistent_xml
                assert f"{(64 + i) * 1024}</memory>" in d.persistent_xml
                assert (d.state, bool(d.live_xml)) == (
                    (PowerState.RUNNING, True) if i % 3 else (PowerState.SHUTOFF, False)
                )
            monkeypatch.setattr(connection, "PARALLEL_MIN", 10**9)
            assert [d for d in h.list_domains() if d.name in names] == threaded  # one by one: the same
            monkeypatch.undo()

            broken = names[n // 2]

            def failing(dom: object, *args: object) -> object:
                if dom.name() == broken:  # type: ignore[attr-defined]
                    raise h._libvirt.libvirtError("read failed on this one")
                return real(dom, *args)  # type: ignore[arg-type]

            monkeypatch.setattr(h, "_live", failing)
            with pytest.raises(HypervisorError, match=f"vm/{broken}: read failed"):
                h.list_domains()
            monkeypatch.undo()
            assert len([d for d in h.list_domains() if d.name in names]) == n  # the connection still serves
        finally:
            drop_domains(h, names)
