"""Warnings once: one line per distinct cause, with the VM count and the first names."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

from reconciler.wording import warngroup

if TYPE_CHECKING:
    from pathlib import Path

CAUSE = "preference fedora: PreferredCPUTopology preferSockets is deprecated"


def test_a_cause_shared_by_many_vms_is_one_line_with_count_and_first_names() -> None:
    lines = [f"vm/vm-{i:03d}: {CAUSE}" for i in range(1000)]
    assert warngroup.group(lines) == (f"{CAUSE} (1000 VMs: vm/vm-000, vm/vm-001, vm/vm-002, ...)",)


def test_distinct_causes_stay_apart_in_first_seen_order() -> None:
    lines = [
        "overlay base: something about the build",
        f"vm/b: {CAUSE}",
        "vm/a: instancetype small: schedulerName is accepted but has no effect",
        f"vm/a: {CAUSE}",
        f"vm/b: {CAUSE}",  # repeated: counted once
    ]
    assert warngroup.group(lines) == (
        "overlay base: something about the build",
        f"{CAUSE} (2 VMs: vm/b, vm/a)",
        "vm/a: instancetype small: schedulerName is accepted but has no effect",
    )


def test_two_vms_are_listed_without_ellipsis() -> None:
    assert warngroup.group([f"vm/x: {CAUSE}", f"vm/y: {CAUSE}"]) == (f"{CAUSE} (2 VMs: vm/x, vm/y)",)


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
