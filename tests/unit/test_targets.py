"""config.targets: the one resolver of a host's target and plan policy.

Covers: the daemon-wide policy's rollout and instancetypeRevisions win over the host
config's, the host config's stand where the policy says nothing; ``plan``/``apply``
flags go on top of the file's policy and leave the rest of it; the owner defaults to
repository and entry path; ``diff`` without ``--config`` assumes pruning on and the
host config alone; ``pick_host`` needs a name only where there are several hosts.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.config import targets
from reconciler.config.daemon import DaemonConfig, HostEntry, Policy, SourceConfig
from reconciler.errors import ConfigError
from reconciler.model import Rollout
from reconciler.settings.host import HostConfig
from reconciler.settings.windows import window

HOST = HostConfig(name="h1", rollout="Stage", instancetype_revisions="pin")
SOURCE = SourceConfig(repo="/srv/vms", path="overlays/prod")


def test_the_daemons_policy_wins_over_the_host_config() -> None:
    policy = Policy(rollout="Restart", instancetype_revisions="follow", prune=True, max_prune_percent=10)
    t = targets.host_target(
        DaemonConfig(SOURCE, (HostEntry("qemu:///system", HOST),), policy), HostEntry("qemu:///system", HOST)
    )
    assert (t.uri, t.config.rollout, t.config.instancetype_revisions) == (
        "qemu:///system",
        "Restart",
        "follow",
    )
    assert (t.policy.host, t.policy.rollout, t.policy.prune, t.policy.max_prune_percent) == (
        "h1",
        Rollout.RESTART,
        True,
        10,
    )
    assert t.policy.owner == "/srv/vms#overlays/prod"
    plain = targets.host_target(DaemonConfig(SOURCE, (HostEntry("x", HOST),)), HostEntry("x", HOST))
    assert (plain.config.rollout, plain.policy.rollout, plain.policy.prune) == ("Stage", Rollout.STAGE, False)


def test_flags_go_on_top_of_the_files_policy() -> None:
    w = window("0 2 * * 6", "2h")
    cfg = DaemonConfig(SOURCE, (HostEntry("x", HOST),), Policy(prune=False, owner="team-a", self_heal=True))
    assert targets.with_flags(cfg, targets.PolicyFlags()) is cfg
    got = targets.with_flags(
        cfg,
        targets.PolicyFlags(
            prune=True, no_self_heal=True, rollout="Restart", confirm_prune="ABCDEF1", restart_windows=(w,)
        ),
    ).policy
    assert (got.prune, got.self_heal, got.rollout, got.confirm_prune, got.restart_windows) == (
        True,
        False,
        "Restart",
        "abcdef1",
        (w,),
    )
    assert got.owner == "team-a"  # not given: the file's


def test_diff_without_a_config_and_picking_a_host() -> None:
    cfg = targets.hostless(HOST)
    t = targets.host_target(cfg, targets.pick_host(cfg, None))
    assert (t.policy.prune, t.policy.rollout, replace(t.config, mac_seed="")) == (True, Rollout.STAGE, HOST)
    assert t.config.mac_seed == targets.owner_of(cfg)[0]  # new MACs are seeded with the owner
    two = DaemonConfig(SOURCE, (HostEntry("a", HOST), HostEntry("b", HostConfig(name="h2"))))
    assert targets.pick_host(two, "h2").uri == "b"
    with pytest.raises(ConfigError, match="give --host NAME"):
        targets.pick_host(two, None)
    with pytest.raises(ConfigError, match="no such host"):
        targets.pick_host(two, "h3")
