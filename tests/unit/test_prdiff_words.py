"""A PR diff's words (``wording/prdiff.py``) as the report always said them, where the
golden reports do not reach: a Secret that reaches no VM and one in a namespace, the
count of VMs a revision reaches, the policy assumed with pruning off and with restart
windows, a changed VM's class when its definition did not move, the summary's counts."""

from __future__ import annotations

from reconciler.wording import prdiff as words


def test_a_secret_by_name_and_what_it_reaches() -> None:
    assert (
        words.secret("default", "db", "changed", True, ()) == "Secret db changed (encrypted): reaches no VM"
    )
    assert words.secret("", "db", "created", False, ("vm/a",)) == "Secret db created: reaches vm/a"
    assert words.secret("team", "db", "deleted", False, ("team/vm/a", "team/vm/b")) == (
        "Secret team/db deleted: reaches team/vm/a, team/vm/b"
    )


def test_the_vms_a_revision_reaches() -> None:
    assert [words.reaches(n) for n in (0, 1, 2)] == ["reaches 0 VMs", "reaches 1 VM", "reaches 2 VMs"]
    assert words.REACHES_NO_VM_AT_HEAD == "reaches no VM at head"
    assert (
        words.revision_use("vm/a", True, "0123456789ab")
        == "vm/a: pinned to base's revision 0123456789ab, unchanged"
    )
    assert words.revision_use("vm/a", False, "0123456789ab") == "vm/a: takes the head revision"


def test_the_policy_assumed() -> None:
    assert words.policy_assumed("daemon.yaml", "h1", None, "Stage", False, ()) == (
        "policy assumed (daemon.yaml, host h1): prune off, rollout Stage, instancetypeRevisions pin"
    )
    assert words.policy_assumed(
        "daemon.yaml", "h1", 30, "Restart", True, ("0 2 * * 6 (UTC) for 2h", "now")
    ) == (
        "policy assumed (daemon.yaml, host h1): prune on (at most 30% of managed domains), rollout Restart, "
        "instancetypeRevisions follow, restart windows 0 2 * * 6 (UTC) for 2h; now"
    )


def test_the_summary_counts() -> None:
    by_class = [("restart", 1), ("live", 0), (words.DEFINITION_UNCHANGED, 2)]
    assert words.summary(1, 0, 3, by_class, 7, 1, 2) == (
        "1 created, 0 deleted, 3 changed (1 restart, 2 definition unchanged), 7 unchanged, "
        "1 instancetype/preference change, 2 errors"
    )
    assert words.summary(0, 0, 0, [("restart", 0)], 0, 2, 1) == (
        "0 created, 0 deleted, 0 changed, 0 unchanged, 2 instancetype/preference changes, 1 error"
    )
