"""A CLI ``apply`` reads the host once: one listing, and then only the domains it touches.

Covers: on libvirt's test driver, with the connection wrapped where the project opens
it (``host.connection._open``: every call goes on to libvirt, counted on the way), an
``apply`` of a revision that changes one shut-off VM and adds one, beside running VMs
it leaves alone and a domain it does not own, lists the host's domains once and asks
for each untouched domain's definitions only in that listing (running: persistent and
running definitions, shut off: the persistent one); a touched domain is read again by
name before the apply (the host must still match the plan) and after it (the status
table), a new one once defined (the root ports libvirt gave it sealed) and after the
apply, and nothing else. ``plan`` reads the host once too.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from reconciler import cli
from reconciler.host import connection
from reconciler.host.hypervisor import Hypervisor
from tests.helpers.domains import drop_domains
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

URI = "test:///default"
P = "rtest-reads-"


class Counted:
    """A libvirt object whose calls are counted in ``calls`` (domains by their name)."""

    def __init__(self, real: Any, calls: Counter[str], prefix: str = "") -> None:
        self._real, self._calls, self._prefix = real, calls, prefix

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            flags = f"({args[0]})" if name == "listAllDomains" and args else ""
            self._calls[f"{self._prefix}{name}{flags}"] += 1
            out = attr(*args, **kwargs)
            if name in ("listAllDomains",):
                return [Counted(d, self._calls, f"{d.name()}.") for d in out]
            if name == "lookupByName":
                return Counted(out, self._calls, f"{out.name()}.")
            return out

        return call


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Hypervisor, Counter[str]]]:
    """The shared test driver (held open: every connection of this process sees its
    domains) and the calls the commands make on it."""
    calls: Counter[str] = Counter()
    opened = connection._open

    def counted(lv: Any, uri: str, deadline_s: float) -> Any:
        return Counted(opened(lv, uri, deadline_s), calls)

    with Hypervisor(URI) as hv:
        monkeypatch.setattr(connection, "_open", counted)
        try:
            yield hv, calls
        finally:
            drop_domains(hv, [d.name for d in hv.list_domains() if d.name.startswith(P)])


def reads(calls: Counter[str], name: str) -> int:
    return calls[f"{name}.XMLDesc"]


def test_apply_lists_the_host_once_and_reads_again_only_what_it_touches(
    host: tuple[Hypervisor, Counter[str]], git_repo: GitRepo
) -> None:
    hv, calls = host
    for name, strategy in (("a", "Always"), ("b", "Always"), ("c", "Halted")):
        git_repo.write(f"vms/{name}.yaml", vm_yaml(f"{P}{name}", strategy=strategy))
    git_repo.commit()
    args = ["--repo", str(git_repo.path), "--connect", URI, "-j1"]
    assert cli.main(["apply", *args, "--yes"]) == 0
    git_repo.write("vms/c.yaml", vm_yaml(f"{P}c", memory="128Mi", strategy="Halted"))
    git_repo.write("vms/d.yaml", vm_yaml(f"{P}d", strategy="Halted"))
    git_repo.commit()

    calls.clear()
    assert cli.main(["plan", *args]) == 2
    assert calls["listAllDomains(0)"] == 1
    assert {n: reads(calls, n) for n in ("test", f"{P}a", f"{P}c", f"{P}d")} == {
        "test": 2,  # a running domain we do not own: persistent and running definitions
        f"{P}a": 2,
        f"{P}c": 1,  # shut off: its persistent definition
        f"{P}d": 0,  # not there yet
    }

    calls.clear()
    assert cli.main(["apply", *args, "--yes"]) == 0
    assert calls["listAllDomains(0)"] == 1  # the plan's listing, and no other
    assert {n: reads(calls, n) for n in ("test", f"{P}a", f"{P}b", f"{P}c", f"{P}d")} == {
        "test": 2,  # untouched: read in the listing only
        f"{P}a": 2,
        f"{P}b": 2,
        f"{P}c": 4,  # listed, read again before the apply, its mark at the define (ownership), after
        f"{P}d": 2,  # absent before the apply; read back once defined (its ports sealed), and after
    }
    assert hv.get_domain(f"{P}c") is not None


def test_a_read_for_the_state_and_mark_alone_leaves_out_the_running_definition(
    host: tuple[Hypervisor, Counter[str]],
) -> None:
    _, calls = host
    with Hypervisor(URI) as hv:  # opened counted; "test": the driver's own running domain
        alone = hv.get_domain("test", live=False)
        assert alone is not None
        assert (alone.active, alone.live_xml, reads(calls, "test")) == (True, "", 1)
        assert "<name>test</name>" in alone.persistent_xml
        calls.clear()
        whole = hv.get_domain("test")
        assert whole is not None
        assert (whole.live_xml != "", reads(calls, "test")) == (True, 2)
