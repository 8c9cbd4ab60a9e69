"""Owner identity and the prune guard (pure): reconciler/ownership/, its hooks in plan/build.py."""

from __future__ import annotations

from reconciler import ownership
from reconciler.model import LiveDomain, OwnershipMark, PowerState
from reconciler.model.changes import Action
from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.reasons import said
from tests.helpers.records import rendered

REV, OLD = "a" * 40, "b" * 40


def live(name: str, owner: str | None, commit: str = OLD) -> LiveDomain:
    d = rendered(name)
    mark = None if owner is None else ownership.mark_for(d, commit, owner=owner)
    xml = ownership.with_mark(d.xml, mark) if mark else d.xml
    return LiveDomain(name, "", PowerState.SHUTOFF, xml, mark=ownership.read_mark(xml))


def test_default_owner_strips_credentials_and_resolves_paths() -> None:
    assert ownership.legacy_owner("https://user:s3cret@git.example/org/vms.git", "/overlays/prod/") == (
        "https://git.example/org/vms#overlays/prod"
    )
    assert ownership.legacy_owner("git@git.example:org/vms.git", "") == "git.example:org/vms#."
    assert "s3cret" not in ownership.legacy_owner("ssh://deploy:s3cret@h/r", "x")
    assert ownership.legacy_owner("relative/../repo", "p").endswith("/repo#p")


def test_owner_survives_a_round_trip_through_the_mark() -> None:
    d = live("a", "/srv/vms#prod")
    assert d.mark is not None
    assert d.mark.owner == "/srv/vms#prod"
    assert d.mark.commit == OLD  # the owner element does not hide its siblings
    # As libvirt writes it back: with a namespace prefix declared on <metadata>.
    xml = d.persistent_xml.replace("<ns0:", "<reconciler:").replace("</ns0:", "</reconciler:")
    xml = xml.replace("xmlns:ns0=", "xmlns:reconciler=")
    got = ownership.read_mark(xml)
    assert got is not None
    assert got.owner == "/srv/vms#prod"
    assert got.commit == OLD


def test_bypass_commit_is_refused_again_on_the_second_reconcile() -> None:
    """Every VM deleted, 3x dummies added: the dummies this revision created are not counted."""
    originals = [live(f"o{i}", "me") for i in range(4)]
    dummies = [rendered(f"d{i}") for i in range(12)]
    policy = PlanPolicy(prune=True, owner="me")
    first = build_plan(REV, dummies, originals, policy)
    assert first.prune_refused == PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 30, prunable=4, managed=4)
    created = [live(f"d{i}", "me", commit=REV) for i in range(12)]  # what the first apply defined
    second = build_plan(REV, dummies, originals + created, policy)
    assert not [c for c in second.changes if c.action == Action.DELETE]
    assert second.prune_refused is not None
    # A later commit on top, with the managed set recorded at the last applied revision.
    third = build_plan(
        "c" * 40,
        dummies,
        originals + created,
        PlanPolicy(prune=True, owner="me", prune_base=frozenset(d.name for d in originals)),
    )
    assert third.prune_refused == PruneRefusal(Guard.MAX_PRUNE_PERCENT, "c" * 40, 30, prunable=4, managed=4)


def test_refusal_holds_until_a_raised_limit_or_a_confirmation() -> None:
    fleet = [live(f"o{i}", "me") for i in range(10)]
    keep = [rendered(f"o{i}") for i in range(8)]  # 2 of 10 = 20%: allowed by the count alone
    held = PlanPolicy(prune=True, owner="me", prune_held=(REV, 30))
    assert build_plan(REV, keep, fleet, held).prune_refused == PruneRefusal(Guard.HELD, REV, 30)
    assert build_plan("c" * 40, keep, fleet, held).prune_refused is None  # a new commit
    raised = PlanPolicy(prune=True, owner="me", prune_held=(REV, 30), max_prune_percent=40)
    assert build_plan(REV, keep, fleet, raised).prune_refused is None
    confirmed = PlanPolicy(prune=True, owner="me", prune_held=(REV, 30), confirm_prune=REV[:7])
    plan = build_plan(REV, keep, fleet, confirmed)
    assert plan.prune_refused is None
    assert sorted(c.name for c in plan.changes if c.action == Action.DELETE) == ["o8", "o9"]
    assert "confirmed" in said(next(c for c in plan.changes if c.name == "o8"))
    too_short = PlanPolicy(prune=True, owner="me", prune_held=(REV, 30), confirm_prune=REV[:3])
    assert build_plan(REV, keep, fleet, too_short).prune_refused is not None


def test_other_owners_are_never_changed_pruned_or_counted() -> None:
    mine = [live(f"m{i}", "me") for i in range(3)]
    theirs = [live(f"t{i}", "them") for i in range(20)]
    policy = PlanPolicy(prune=True, owner="me", max_prune_percent=40)
    plan = build_plan(REV, [rendered("m0"), rendered("m1"), rendered("t0")], mine + theirs, policy)
    by = {c.name: c for c in plan.changes}
    assert not any(n.startswith("t") and n != "t0" for n in by)  # not listed, not prunable
    assert by["t0"].action == Action.SKIPPED
    assert "another owner (them)" in said(by["t0"])
    # 1 of 3 of mine = 33% <= 40%: the 20 foreign domains did not make it 1 of 23.
    assert by["m2"].action == Action.DELETE


def test_adoption_takes_over_another_owners_domain() -> None:
    from dataclasses import replace

    d = replace(rendered("t0"), adopt=True)
    plan = build_plan(REV, [d], [live("t0", "them")], PlanPolicy(owner="me"))
    c = plan.changes[0]
    assert c.action == Action.ADOPT
    assert "owner them" in said(c)
    assert plan.owner == "me"


def test_legacy_marks_are_claimed_when_in_git_and_never_pruned_otherwise() -> None:
    legacy = [live("l0", ""), live("l1", "")]
    plan = build_plan(
        REV, [rendered("l0")], legacy, PlanPolicy(prune=True, owner="me", max_prune_percent=100)
    )
    by = {c.name: c for c in plan.changes}
    assert by["l0"].action == Action.UPDATE
    assert "ownership record refreshed" in said(by["l0"])
    assert by["l1"].action == Action.SKIPPED
    assert "no owner" in said(by["l1"])


def test_marks_without_owner_are_ours_when_no_owner_is_configured() -> None:
    mark = OwnershipMark(commit=OLD, path="p", spec_hash="h")
    assert ownership.owned_by(mark, "")
    assert not ownership.owned_by(mark, "me")
    assert ownership.claimable(mark, "me")
    assert not ownership.foreign(mark, "me")


def test_the_guard_counts_against_the_window_start_and_a_count() -> None:
    """The issue's bypass: 5 real VMs, then 20 Halted ones added in one commit, then the 5
    deleted in the next: counted against the 5 managed when the window began, refused.
    Prunes made earlier in the window count too; ``maxPrune`` is a count beside the share."""
    real = [live(f"r{i}", "me") for i in range(5)]
    added = [live(f"h{i:02d}", "me", commit=REV) for i in range(20)]
    keep = [rendered(f"h{i:02d}") for i in range(20)]
    window = frozenset(d.name for d in real)
    plan = build_plan("c" * 40, keep, real + added, PlanPolicy(prune=True, owner="me", prune_base=window))
    assert plan.prune_refused == PruneRefusal(Guard.MAX_PRUNE_PERCENT, "c" * 40, 30, prunable=5, managed=5)
    # One of ten deleted earlier in the window, two more now: 3 of 10 > 20 %.
    ten = [live(f"o{i}", "me") for i in range(10)]
    base = frozenset(d.name for d in ten)
    policy = PlanPolicy(prune=True, owner="me", prune_base=base, max_prune_percent=20)
    plan = build_plan(REV, [rendered(f"o{i}") for i in range(1, 8)], ten[1:], policy)
    assert plan.prune_refused == PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 20, 2, managed=10, gone=1)
    counted = PlanPolicy(prune=True, owner="me", max_prune=1, max_prune_percent=100)
    plan = build_plan(REV, [rendered(f"o{i}") for i in range(8)], ten, counted)
    assert plan.prune_refused == PruneRefusal(Guard.MAX_PRUNE, REV, 1, prunable=2)
    assert build_plan(REV, [rendered(f"o{i}") for i in range(9)], ten, counted).prune_refused is None


def test_adoption_is_one_time() -> None:
    """Two owners whose repositories both keep ``adopt: "true"``: the first adoption
    stands; the other owner's plan is a conflict error and changes nothing, the adopter's
    plan warns of the spent annotation; once released, it may be adopted again."""
    from dataclasses import replace

    d = replace(rendered("v"), adopt=True)
    theirs = live("v", "them")
    adopt = build_plan(REV, [d], [theirs], PlanPolicy(owner="me")).changes[0]
    assert adopt.action == Action.ADOPT
    assert adopt.definition is not None
    assert adopt.definition.mark.adopted_from == "them"
    held = LiveDomain(
        "v", "", PowerState.SHUTOFF, adopt.definition.xml, mark=ownership.read_mark(adopt.definition.xml)
    )
    assert held.mark is not None
    assert (held.mark.owner, held.mark.adopted_from) == ("me", "them")
    back = build_plan(REV, [d], [held], PlanPolicy(owner="them"))
    assert back.changes[0].action == Action.SKIPPED
    (err,) = back.errors
    assert err.message.startswith(
        "conflict: the domain belongs to owner me, which adopted it from owner them"
    )
    ours = build_plan(REV, [d], [held], PlanPolicy(owner="me"))
    assert ours.changes[0].action == Action.UNCHANGED
    assert any(w.message.startswith("conflict: adopted from owner them") for w in ours.warnings)
    # "me" lets it go: its VM leaves git, the domain is kept and released.
    release = build_plan(REV, [], [held], PlanPolicy(owner="me")).changes[0]
    assert release.action == Action.UPDATE
    assert release.definition is not None
    assert release.definition.mark.released
    released = LiveDomain("v", "", PowerState.SHUTOFF, release.definition.xml, mark=release.definition.mark)
    assert build_plan(REV, [], [released], PlanPolicy(owner="me")).changes[0].action == Action.SKIPPED
    again = build_plan(REV, [d], [released], PlanPolicy(owner="them")).changes[0]
    assert again.action == Action.ADOPT


def test_a_mark_made_started_is_the_mark_after_the_first_start() -> None:
    d = rendered("a")
    assert ownership.mark_for(d, "f" * 40, started=True) == ownership.with_start(
        ownership.mark_for(d, "f" * 40), 0.0, 0
    )
    assert ownership.mark_for(d, "f" * 40, owner="me").started is False
