"""The ownership mark in <metadata> (reconciler.ownership.inventory), pure.

Covers: round trip of every mark field (hypothesis) through with_mark / read_mark;
other metadata kept; the mark as libvirt writes it back after virDomainSetMetadata
(default namespace) read on the fast path; unowned XML; strip_mark; mark_for /
mark_current / with_start.
"""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from reconciler import ownership
from reconciler.model import OwnershipMark, RenderedDomain, RevisionInfo, RunStrategy, VMKey, VolumeSpec

DOMAIN = "<domain type='kvm'><name>a</name><uuid>u</uuid><memory>1</memory></domain>"
text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20)


@given(
    commit=text,
    path=text,
    prune=st.booleans(),
    started=st.booleans(),
    restarts=st.integers(0, 99),
    ephemeral=st.lists(text.filter(bool), max_size=3),
    presets=st.lists(text.filter(bool), max_size=2),
    grace=st.integers(0, 3600),
)
def test_round_trip(
    commit: str,
    path: str,
    prune: bool,
    started: bool,
    restarts: int,
    ephemeral: list[str],
    presets: list[str],
    grace: int,
) -> None:
    mark = OwnershipMark(
        commit=commit,
        path=path,
        spec_hash="abc",
        revisions=(RevisionInfo("VirtualMachineInstancetype", "small", "default", "h", "c", '{"spec":{}}'),),
        presets=tuple(presets),
        prune=prune,
        run_strategy="Always",
        ephemeral=tuple(ephemeral),
        grace_period_s=grace,
        started=started,
        last_start=1234.5 if started else 0.0,
        restarts=restarts if started else 0,
        unplugs=tuple(ephemeral[:1]),
    )
    assert ownership.read_mark(ownership.with_mark(DOMAIN, mark)) == mark


def test_other_metadata_is_kept_and_mark_replaced() -> None:
    xml = DOMAIN.replace("<memory>", "<metadata><app:x xmlns:app='urn:app'>1</app:x></metadata><memory>")
    one = ownership.with_mark(xml, OwnershipMark("c1", "p", "h1"))
    two = ownership.with_mark(one, OwnershipMark("c2", "p", "h2"))
    assert "urn:app" in two
    assert two.count("owner>") == 2
    assert ownership.read_mark(two) == OwnershipMark("c2", "p", "h2")


def test_mark_as_libvirt_writes_it_back() -> None:
    mark = OwnershipMark("c", "vms/a.yaml", "h", started=True, last_start=5.0, restarts=1)
    element = ownership.mark_xml(mark)
    assert element.startswith(f'<owner xmlns="{ownership.NS}"')
    declared = element.replace("<owner ", f'<owner xmlns:reconciler="{ownership.NS}" ', 1)
    libvirt_style = DOMAIN.replace("<memory>", f"<metadata>{declared}</metadata><memory>")
    assert ownership.read_mark(libvirt_style) == mark


def test_unowned() -> None:
    assert ownership.read_mark(DOMAIN) is None


def rendered(**kw: object) -> RenderedDomain:
    return RenderedDomain(
        key=VMKey("default", "a"),
        uuid="",
        xml_data=DOMAIN,
        spec_hash=hashlib.sha256(DOMAIN.encode()).hexdigest(),
        run_strategy=RunStrategy.ONCE,
        source_path="vms/a.yaml",
        **kw,  # type: ignore[arg-type]
    )


def test_mark_for_keeps_run_bookkeeping() -> None:
    d = rendered(
        volumes=(VolumeSpec("cloudinit-iso", "/v/a-ci.iso", ephemeral=True), VolumeSpec("file", "/v/a.qcow2"))
    )
    first = ownership.mark_for(d, "c1")
    assert first.ephemeral == ("/v/a-ci.iso",)
    assert first.run_strategy == "Once"
    assert not first.started
    started = ownership.with_start(first, 99.0, 0)
    again = ownership.mark_for(d, "c2", started)
    assert again.started
    assert again.last_start == 99.0
    assert again.commit == "c2"
    assert ownership.mark_current(started, d)
    assert not ownership.mark_current(started, rendered(prune=False))


def test_strip_mark() -> None:
    import xml.etree.ElementTree as ET

    marked = ET.fromstring(ownership.with_mark(DOMAIN, OwnershipMark("c", "p", "h")))
    assert ET.tostring(ownership.strip_mark(marked), encoding="unicode").count("metadata") == 0


def test_marks_of_many_domains_share_their_revision_data() -> None:
    data = '{"spec":{"cpu":{"guest":2}}}'
    rev = RevisionInfo("VirtualMachineClusterInstancetype", "u1.small", "", "h", "c", data)
    cache = ownership.MarkCache()  # a listing's, as the hypervisor keeps it
    marks = [
        ownership.read_mark(
            ownership.with_mark(
                DOMAIN.replace("<name>a<", f"<name>vm{i}<"), OwnershipMark("c", f"vm{i}", "s", (rev,))
            ),
            cache,
        )
        for i in range(3)
    ]
    assert all(m is not None and m.path == f"vm{i}" for i, m in enumerate(marks))
    texts = [m.revisions[0].data for m in marks if m is not None]
    assert texts == [data] * 3
    assert texts[0] is texts[1] is texts[2]


def test_marks_of_many_domains_share_their_disk_sizes() -> None:
    cache = ownership.MarkCache()
    size = 10 * 2**30
    marks = []
    for i in range(3):  # one listing each: a mark parsed later shares the size its neighbours hold
        xml = ownership.with_mark(
            DOMAIN.replace("<name>a<", f"<name>vm{i}<"),
            OwnershipMark("c", f"vm{i}", "s", volumes=((f"/images/vm{i}.qcow2", size),)),
        )
        marks.append(ownership.read_mark(xml, cache))
        cache.end_run()
        cache.end_run()
    volumes = [m.volumes[0] for m in marks if m is not None]
    assert volumes == [(f"/images/vm{i}.qcow2", size) for i in range(3)]
    assert volumes[0][1] is volumes[1][1] is volumes[2][1]
