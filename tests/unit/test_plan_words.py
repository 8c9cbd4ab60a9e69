"""The CLI's words about a plan shown and applied (``wording/plan_lines.py``), as ``plan``
and ``apply`` always printed them: what is shown, the question asked on a terminal (one
change or several, an adoption), why a plan is not applied without one (the first five
VMs named), what moved on the host since the plan, why apply leaves a domain alone."""

from __future__ import annotations

from reconciler.wording import plan_lines as words

SHA = "0123456789abcdef" * 2 + "01234567"


def test_what_a_plan_is_shown_of() -> None:
    assert words.shown("plan", "h1", "qemu:///system", SHA, ".") == (
        "plan: host h1 at qemu:///system, revision 0123456789ab, entry ."
    )
    assert words.in_memory("test:///default", "libvirt's in-memory test driver") == (
        "note: test:///default is libvirt's in-memory test driver; give --connect or --config for a real host"
    )


def test_the_question_on_a_terminal() -> None:
    assert words.question(1, "h1", "qemu:///system", ()) == "apply 1 change to host h1 (qemu:///system)?"
    assert words.question(3, "h1", "qemu:///system", ("vm/a", "vm/b")) == (
        "apply 3 changes to host h1 (qemu:///system), adopting vm/a, vm/b (defined by someone else)?"
    )
    assert words.not_applied(words.NOT_CONFIRMED) == "not applied: not confirmed"


def test_what_needs_yes_without_a_terminal() -> None:
    assert words.needs_yes([("vm/a", "restart")]) == (
        "the plan deletes, restarts, stops or adopts 1 VM(s): vm/a (restart); without a terminal to ask on, "
        "that needs --yes"
    )
    seven = [(f"vm/{i}", "stop") for i in range(7)]
    assert words.needs_yes(seven) == (
        "the plan deletes, restarts, stops or adopts 7 VM(s): vm/0 (stop), vm/1 (stop), vm/2 (stop), "
        "vm/3 (stop), vm/4 (stop) and 2 more; without a terminal to ask on, that needs --yes"
    )


def test_what_moved_since_the_plan() -> None:
    assert words.host_changed(["vm/a: its definition changed since the plan", "vm/b: x"]) == (
        "the host changed since the plan; nothing applied, plan again:\n"
        "  vm/a: its definition changed since the plan\n  vm/b: x"
    )
    assert words.window_closed("vm/a") == (
        "vm/a: its restart was planned inside a restart window, which has closed since"
    )
    assert words.state_since("vm/a", "running", "shutoff") == "vm/a: was running when planned, now shutoff"


def test_why_apply_leaves_a_domain_alone() -> None:
    assert (
        words.UNDEFINED_SINCE,
        words.DEFINED_SINCE,
        words.NOT_MANAGED,
        words.ANOTHER_OWNER,
        words.MARK_CHANGED,
    ) == (
        "the domain was undefined since the plan",
        "a domain of this name was defined since the plan: not touched",
        "the domain is not managed by the reconciler (no ownership mark): not touched",
        "the domain belongs to another owner: not touched",
        "the domain's ownership mark changed since the plan: not touched",
    )
