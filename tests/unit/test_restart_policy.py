"""``spec.restartPolicy`` of the design notes, rendered through the CLI (no host).

Covers: ``Always`` / ``OnFailure`` / ``Never`` in any case map to the run strategies
Always / RerunOnFailure / Once; with ``runStrategy`` or ``running`` it is an error
naming the file and line; an unknown value is an error listing the supported ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import cli

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
{lifecycle}  template:
    spec:
      domain:
        devices: {{}}
        memory:
          guest: 64Mi
"""


def render(tmp_path: Path, lifecycle: str) -> int:
    path = tmp_path / "web.yaml"
    path.write_text(VM.format(lifecycle=lifecycle))
    return cli.main(["render", "-f", str(path)])


@pytest.mark.parametrize(
    ("policy", "strategy"),
    [
        ("Always", "Always"),
        ("always", "Always"),
        ("OnFailure", "RerunOnFailure"),
        ("onfailure", "RerunOnFailure"),
        ("Never", "Once"),
        ("NEVER", "Once"),
    ],
)
def test_restart_policy_maps_to_a_run_strategy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, strategy: str
) -> None:
    assert render(tmp_path, f"  restartPolicy: {policy}\n") == 0
    assert f"runStrategy {strategy} -->" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("lifecycle", "message"),
    [
        (
            "  restartPolicy: Never\n  runStrategy: Always\n",
            "restartPolicy and runStrategy are mutually exclusive",
        ),
        ("  running: true\n  restartPolicy: Always\n", "restartPolicy and running are mutually exclusive"),
        (
            "  restartPolicy: sometimes\n",
            "unsupported restartPolicy 'sometimes' (supported: Always, OnFailure, Never)",
        ),
    ],
)
def test_restart_policy_errors_name_file_and_line(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str], lifecycle: str, message: str
) -> None:
    git_repo.write("vms/web.yaml", VM.format(lifecycle=lifecycle))
    git_repo.commit()
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    line = 6 if lifecycle.startswith("  restartPolicy") else 7
    out = capsys.readouterr().out
    assert f"vms/web.yaml:{line}:3: vm/web: spec.restartPolicy: {message}" in out
