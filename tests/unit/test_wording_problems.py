"""Problems in words (wording.problems): a line per problem, warnings once per cause with
the VM count and the first names, failures of an apply grouped by cause."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from reconciler.model import Problem, Severity, VMKey
from reconciler.model.changes import Action
from reconciler.model.results import ApplyResult
from reconciler.wording import problems

if TYPE_CHECKING:
    from pathlib import Path

CAUSE = "preference fedora: PreferredCPUTopology preferSockets is deprecated"


def warning(vm: str, message: str = CAUSE, **kw: object) -> Problem:
    return Problem(message, vm=VMKey.from_domain(vm), severity=Severity.WARNING, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("problem", "text"),
    [
        (Problem("boom"), "boom"),
        (Problem("boom", path="a/b.yaml"), "a/b.yaml: boom"),
        (Problem("boom", path="a/b.yaml", line=3), "a/b.yaml:3: boom"),
        (Problem("boom", path="a/b.yaml", line=3, column=7), "a/b.yaml:3:7: boom"),
        (Problem("boom", line=3, column=7), "boom"),  # no file: no position either
        (Problem("boom", vm=VMKey("team", "web")), "vm/team_web: boom"),
        (Problem("boom", subject="host h1"), "host h1: boom"),
        (
            Problem("bad", vm=VMKey("", "web"), path="vms/web.yaml", line=9, column=5, field="spec.x"),
            "vms/web.yaml:9:5: vm/web: spec.x: bad",
        ),
        (Problem("a\x1b[31mb", path="v\x1bms.yaml"), "v\\x1bms.yaml: a\\x1b[31mb"),  # printable
    ],
)
def test_a_problem_in_words(problem: Problem, text: str) -> None:
    assert problems.words(problem) == text
    where = problems.location(problem)
    assert problems.located_message(problem) == (text[len(where) + 2 :] if where else text)


def test_a_cause_shared_by_many_vms_is_one_line_with_count_and_first_names() -> None:
    lines = [warning(f"vm-{i:03d}") for i in range(1000)]
    assert problems.group(lines) == (f"{CAUSE} (1000 VMs: vm/vm-000, vm/vm-001, vm/vm-002, ...)",)


def test_distinct_causes_stay_apart_in_first_seen_order() -> None:
    lines = [
        Problem("something about the build", subject="overlay base", severity=Severity.WARNING),
        warning("b"),
        warning("a", "instancetype small: schedulerName is accepted but has no effect"),
        warning("a"),
        warning("b"),  # repeated: counted once
        warning("c", "cause", path="vms/c.yaml", line=2),  # located: its own line
        warning("d", "cause", field="spec.x"),
        warning("e", "cause", field="spec.x"),
    ]
    assert problems.group(lines) == (
        "overlay base: something about the build",
        f"{CAUSE} (2 VMs: vm/b, vm/a)",
        "vm/a: instancetype small: schedulerName is accepted but has no effect",
        "vms/c.yaml:2: vm/c: cause",
        "spec.x: cause (2 VMs: vm/d, vm/e)",
    )


def test_two_vms_are_listed_without_ellipsis() -> None:
    assert problems.group([warning("x"), warning("y")]) == (f"{CAUSE} (2 VMs: vm/x, vm/y)",)


def test_a_failure_without_its_own_vm_names_the_vm_nowhere() -> None:
    web = VMKey("team", "web")
    libvirt = Problem("start failed: domain 'team_web' is already running; team_web.qcow2 kept", vm=web)
    assert (
        problems.anonymous(libvirt, web)
        == "<vm>: start failed: domain '<vm>' is already running; team_web.qcow2 kept"
    )
    other = Problem("storage pool images is not active", subject="pool/images")
    assert problems.anonymous(other, web) == "pool/images: storage pool images is not active"


def test_the_first_cause_of_a_failed_apply_is_whole_though_it_holds_a_semicolon() -> None:
    def failed(vm: str, cause: str) -> ApplyResult:
        key = VMKey.from_domain(vm)
        return ApplyResult(
            key, Action.UPDATE, False, f"{key.subject}: {cause}", problem=Problem(cause, vm=key)
        )

    cause = "start failed: domain is already running; its disk kept\nlibvirt: detail"
    many = [failed(f"vm{i}", cause) for i in range(8)]
    assert problems.summarize(many).startswith(f"{cause} (8 VMs: ")
    assert problems.first_cause(many) == "start failed: domain is already running; its disk kept"
    few = [failed("a", "x; y"), failed("b", "z")]
    assert problems.summarize(few) == "vm/a: x; y; vm/b: z"  # the message: causes joined
    assert problems.first_cause(few) == "vm/a: x; y"  # the field: the first cause, not cut at "; "
    assert problems.first_cause([]) == ""
    assert problems.joined(["a; b", "", "c"]) == "a; b; c"


def _fleet(root: Path, n: int) -> None:
    (root / "vms").mkdir(parents=True)
    (root / "types.yaml").write_text(
        "apiVersion: instancetype.kubevirt.io/v1beta1\n"
        "kind: VirtualMachineClusterPreference\n"
        "metadata:\n  name: old\n"
        "spec:\n  cpu:\n    preferredCPUTopology: preferSockets\n"
    )
    resources = ["types.yaml"]
    for i in range(n):
        (root / "vms" / f"vm{i}.yaml").write_text(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\n"
            f"metadata:\n  name: vm{i}\n"
            "spec:\n  runStrategy: Halted\n  preference:\n    name: old\n"
            "  template:\n    spec:\n      domain:\n        devices: {}\n"
            "        memory:\n          guest: 1Gi\n"
        )
        resources.append(f"vms/vm{i}.yaml")
    (root / "kustomization.yaml").write_text("resources:\n" + "".join(f"- {r}\n" for r in resources))


def test_validate_prints_one_line_for_a_deprecated_preference_field_used_by_every_vm(tmp_path: Path) -> None:
    _fleet(tmp_path, 5)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "x"],
        cwd=tmp_path,
        check=True,
    )
    got = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "validate", "--repo", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert got.returncode == 0, got.stderr
    warnings = [line for line in got.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1, got.stderr
    assert "preferSockets is deprecated" in warnings[0]
    assert "(5 VMs: vm/vm0, vm/vm1, vm/vm2, ...)" in warnings[0]
