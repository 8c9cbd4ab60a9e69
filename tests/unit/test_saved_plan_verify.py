"""What ``plan.verify`` names of a saved plan's claim, on values (no host, no file).

Covers: the element paths where two domain XML documents differ (text, attributes, a
device added, the n-th of several devices); XML nested far deeper than a domain's is
named as a whole, never a RecursionError; every host file path of a definition or a
volume outside the allowed directories is named once per VM, a ``..`` path included.
"""

from __future__ import annotations

import pytest

from reconciler.plan import verify

BASE = (
    '<domain><memory unit="b">1</memory><devices><emulator>/usr/bin/qemu</emulator>'
    '<disk><source file="/var/lib/reconciler/a"/></disk><disk><source file="/var/lib/reconciler/b"/></disk>'
    "</devices></domain>"
)


@pytest.mark.parametrize(
    ("edited", "named"),
    [
        (BASE.replace(">1<", ">2<"), ["memory"]),
        (BASE.replace('unit="b"', 'unit="KiB"'), ["memory"]),
        (BASE.replace("/usr/bin/qemu", "/bin/sh"), ["devices/emulator"]),
        (BASE.replace("/var/lib/reconciler/b", "/etc/shadow"), ["devices/disk[2]/source"]),
        (BASE.replace("</devices>", "<disk/></devices>"), ["devices/disk[3]"]),
        (BASE, []),
    ],
)
def test_xml_differences_name_the_elements(edited: str, named: list[str]) -> None:
    assert verify.xml_differences(BASE, edited) == named


def test_xml_nested_deeper_than_a_domain_is_named_whole() -> None:
    deep = "<domain>" + "<a>" * 5000 + "x" + "</a>" * 5000 + "</domain>"
    (named,) = verify.xml_differences(deep, deep.replace("x", "y"))
    assert named.startswith("a/a/a")
    assert named.count("/") < 40


def test_paths_outside_the_allowed_directories_are_named_per_vm() -> None:
    change = {
        "name": "web",
        "definition": {"xml": BASE.replace("/var/lib/reconciler/b", "/etc/shadow")},
        "desired": {
            "xml": BASE.replace("/var/lib/reconciler/a", "/var/lib/reconciler/../../etc/passwd"),
            "volumes": [{"path": "/root/.ssh/authorized_keys"}, {"path": "/var/lib/reconciler/ok"}],
        },
    }
    (line,) = verify.outside_allowed({"plan": {"changes": [change]}}, ("/var/lib/reconciler",))
    assert line.startswith("vm/web: ")
    for path in ("/etc/shadow", "/var/lib/reconciler/../../etc/passwd", "/root/.ssh/authorized_keys"):
        assert path in line
    assert "/var/lib/reconciler/ok" not in line
    assert (
        verify.outside_allowed(
            {"plan": {"changes": [{"name": "a", "definition": {"xml": BASE}}]}}, ("/var/lib/reconciler",)
        )
        == ()
    )
