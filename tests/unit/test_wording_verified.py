"""What ``apply FILE`` says a saved plan claims that this host does not plan
(``wording/verified.py``), every kind of difference, as it always said it."""

from __future__ import annotations

from reconciler.wording import verified as words

REV = "0123456789ab"


def test_each_difference_in_words() -> None:
    assert words.outside_allowed("vm/a", "/etc/shadow", ["/srv"]) == (
        "vm/a: /etc/shadow: outside this host's allowedDirectories (/srv)"
    )
    assert words.not_this_hosts(words.POLICY, ["owner", "host"]) == (
        "the policy it was planned with is not this host's: owner, host differ"
    )
    assert words.not_this_hosts(words.HOST_CONFIG, [words.ALL]) == (
        "the host config it was planned with is not this host's: all differ"
    )
    assert (
        words.plan_key("errors", REV) == f"the plan's errors is not what revision {REV} plans for this host"
    )
    assert words.entry_key("revision") == "the plan's revision is not this host's"
    assert words.no_fingerprint("vm/a") == "vm/a: the plan touches it and holds no fingerprint of it"
    assert words.stray_fingerprint(words.A_CHANGE) == (
        "a change: the plan holds a fingerprint of a domain it does not touch"
    )
    assert words.host_moved("vm/a") == "vm/a: the host no longer matches the plan"
    assert (
        words.not_planned("vm/a", "delete", REV)
        == f"vm/a: the plan's delete is not in what revision {REV} plans"
    )
    assert words.missing_change("vm/a", REV, "create") == (
        f"vm/a: revision {REV} plans create for it; the plan holds no change for it"
    )
    assert words.rendered_differs("vm/a", "definition", REV, ["memory", "devices/disk[2]"]) == (
        f"vm/a: its definition is not what revision {REV} renders for this host: memory, devices/disk[2]"
    )
    assert words.rendered_differs("vm/a", "desired", REV, []) == (
        f"vm/a: its desired is not what revision {REV} renders for this host: its records"
    )
    assert (
        words.change_differs("vm/a", "start", REV)
        == f"vm/a: its start is not what revision {REV} plans for this host"
    )
    assert words.stale_image("vm/a", "quay.io/x:1", "", "sha256:b") == (
        "vm/a: image quay.io/x:1 was planned as a local file, this host now resolves it to sha256:b (a stale plan)"
    )
    assert (words.NOT_XML, words.FORMATTING) == ("not XML", "formatting")
