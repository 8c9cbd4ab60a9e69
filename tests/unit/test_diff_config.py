"""``diff --config``: the PR diff under the daemon's policy, resolved as the daemon does.

Covers: with a daemon config whose ``policy.rollout``, ``instancetypeRevisions``,
``prune`` and ``restartWindows`` differ from the host config's, ``diff --config FILE
--host NAME`` follows the daemon (an edited instancetype reaches the VM under
``follow``; its restart waits for the window under ``Restart``; a VM that left git is
kept with pruning off) and states the policy it assumed in text, Markdown and JSON;
without ``--config`` the host config alone decides, as before, and no policy line is
added; a config with several hosts needs ``--host``, and ``--host`` needs ``--config``;
``--repo`` and ``--path`` default to the config's source.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

CATALOG = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {{name: dc.small}}
spec: {{cpu: {{guest: 1}}, memory: {{guest: {memory}}}}}
"""
WEB = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: web}
spec:
  runStrategy: Always
  instancetype: {name: dc.small}
  template: {spec: {domain: {devices: {}}}}
"""
OLD = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: old}
spec:
  runStrategy: Always
  template: {spec: {domain: {memory: {guest: 64Mi}, devices: {}}}}
"""
WINDOW = "0 2 * * 6 (UTC) for 2h"


@pytest.fixture
def change(git_repo: GitRepo) -> tuple[str, str]:
    git_repo.write("fleet/catalog.yaml", CATALOG.format(memory="1Gi"))
    git_repo.write("fleet/web.yaml", WEB)
    git_repo.write("fleet/old.yaml", OLD)
    base = git_repo.commit("base")
    git_repo.write("fleet/catalog.yaml", CATALOG.format(memory="2Gi"))
    git_repo.remove("fleet/old.yaml")
    head = git_repo.commit("dc.small: 2Gi; old removed")
    return base, head


def config(tmp_path: Path, repo: Path, hosts: int = 2) -> Path:
    host = tmp_path / "host.yaml"
    host.write_text("name: h1\nrollout: Stage\ninstancetypeRevisions: pin\n")
    more = "".join(
        f"  - connect: qemu+ssh://h{i}/system\n    host: {{name: h{i}}}\n" for i in range(2, hosts + 1)
    )
    path = tmp_path / "config.yaml"
    path.write_text(
        f"source: {{repo: {repo}, path: fleet}}\n"
        f"hosts:\n  - connect: test:///default\n    hostFile: {host}\n{more}"
        "policy:\n"
        "  rollout: Restart\n"
        "  instancetypeRevisions: follow\n"
        "  prune: false\n"
        "  maxPrunePercent: 50\n"
        "  restartWindows: [{schedule: '0 2 * * 6', duration: 2h}]\n"
    )
    return path


def test_diff_with_the_daemons_config_follows_its_policy_and_says_so(
    git_repo: GitRepo, tmp_path: Path, change: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = change
    cfg = config(tmp_path, git_repo.path)
    refs = ["--base", base, "--head", head]

    # The host config alone (no --config): pinned, staged, pruning worded for any host.
    host = tmp_path / "host.yaml"
    repo = ["--repo", str(git_repo.path), "--path", "fleet"]
    assert cli.main(["diff", *repo, *refs, "--host-config", str(host)]) == 2
    out = capsys.readouterr().out
    assert "policy assumed" not in out
    assert "vm/web: pinned to base's revision" in out, out
    assert "on hosts with pruning on; kept on hosts with pruning off" in out, out

    # Several hosts: the one to speak for must be named; --host alone means nothing.
    assert cli.main(["diff", *refs, "--config", str(cfg)]) == 1
    assert "the config has 2 hosts (h1, h2): give --host NAME" in capsys.readouterr().err
    assert cli.main(["diff", *repo, *refs, "--host", "h1"]) == 1
    assert "--host: names a host of the daemon's config: give --config FILE too" in capsys.readouterr().err

    # The daemon's policy: follow, Restart in the window, pruning off; --repo/--path from the config.
    assert cli.main(["diff", *refs, "--config", str(cfg), "--host", "h1"]) == 2
    out = capsys.readouterr().out
    assert (
        f"policy assumed ({cfg}, host h1): prune off, rollout Restart, instancetypeRevisions follow, "
        f"restart windows {WINDOW}" in out
    ), out
    assert f"will be restarted in the next restart window ({WINDOW})" in out, out
    assert "vm/web: takes the head revision" in out, out
    assert "left git: kept, the domain stays defined (pruning is off in the daemon's policy)" in out, out

    assert cli.main(["diff", *refs, "--config", str(cfg), "--host", "h1", "-o", "markdown"]) == 2
    md = capsys.readouterr().out
    assert "policy assumed (" in md
    assert "rollout Restart, instancetypeRevisions follow" in md

    assert cli.main(["diff", *refs, "--config", str(cfg), "--host", "h1", "-o", "json"]) == 2
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings == {
        "instancetypeRevisions": "follow",
        "rollout": "Restart",
        "config": str(cfg),
        "host": "h1",
        "prune": False,
        "maxPrunePercent": 50,
        "restartWindows": [WINDOW],
    }


def test_one_host_needs_no_name_and_an_unknown_one_is_named(
    git_repo: GitRepo, tmp_path: Path, change: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = change
    cfg = config(tmp_path, git_repo.path, hosts=1)
    assert cli.main(["diff", "--base", base, "--head", head, "--config", str(cfg), "-o", "json"]) == 2
    assert json.loads(capsys.readouterr().out)["settings"]["host"] == "h1"
    assert cli.main(["diff", "--base", base, "--config", str(cfg), "--host", "h9"]) == 1
    assert "--host h9: no such host in the config (hosts: h1)" in capsys.readouterr().err
