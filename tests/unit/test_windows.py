"""Restart windows (pure): settings/windows.py, its config and annotation forms, and the plan's use of them."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import pytest

from reconciler import ownership
from reconciler.config.daemon_file import parse_config
from reconciler.errors import ConfigError
from reconciler.model import LiveDomain, PowerState, RenderedDomain, Rollout, RunStrategy
from reconciler.model.changes import Action
from reconciler.plan.build import build_plan
from reconciler.prdiff.entry import changed
from reconciler.settings import windows
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.reasons import said
from tests.helpers.records import rendered

if TYPE_CHECKING:
    from pathlib import Path


def at(text: str, tz: str = "Europe/Berlin") -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp()


NIGHTLY = windows.window("0 2 * * *", "2h", "Europe/Berlin")


def test_open_inside_and_closed_outside_with_the_time_zone() -> None:
    assert windows.is_open(NIGHTLY, at("2026-11-25T02:00:00"))
    assert windows.is_open(NIGHTLY, at("2026-11-25T03:59:00"))
    assert not windows.is_open(NIGHTLY, at("2026-11-25T04:00:00"))
    assert not windows.is_open(NIGHTLY, at("2026-11-25T00:59:59", "UTC"))
    assert windows.is_open(NIGHTLY, at("2026-11-25T01:00:00", "UTC"))  # 02:00 in Berlin: it opens
    g = windows.gate([NIGHTLY], at("2026-11-25T12:00:00"))
    assert not g.open
    assert g.text == "2026-11-26 02:00 Europe/Berlin"
    assert g.opens_at == at("2026-11-26T02:00:00")


def test_bad_windows_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="not a cron schedule"):
        windows.parse_annotation("61 2 * * *; 1h")
    with pytest.raises(ValueError, match="not a time zone"):
        windows.parse_annotation("0 2 * * *; 1h; Mars/Olympus")
    with pytest.raises(ValueError, match="positive duration"):
        windows.parse_annotation("0 2 * * *; soon")
    assert windows.parse_annotation("0 2 * * 6; 90m").duration_s == 5400


def test_config_restart_windows(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    text = (
        "source: {repo: /srv/vms}\npolicy:\n  restartWindows:\n"
        "    - {schedule: '0 2 * * *', duration: 2h, timeZone: Europe/Berlin}\n"
    )
    c = parse_config(text.encode(), str(cfg))
    assert c.policy.restart_windows == (NIGHTLY,)
    with pytest.raises(ConfigError, match=r"c.yaml:4:\d+: policy.restartWindows\[0\].timeZone"):
        parse_config(text.replace("Europe/Berlin", "Nowhere").encode(), str(cfg))


def running(d_old: RenderedDomain) -> LiveDomain:
    mark = ownership.mark_for(d_old, "f" * 40)
    xml = ownership.with_mark(d_old.xml, mark)
    return LiveDomain(
        d_old.name, "", PowerState.RUNNING, xml, live_xml=d_old.xml, mark=ownership.read_mark(xml)
    )


def _vm(memory_kib: int, vcpus: int) -> RenderedDomain:
    xml = (
        f"<domain type='test'><name>w</name><memory unit='KiB'>{memory_kib}</memory>"
        f"<currentMemory unit='KiB'>{memory_kib}</currentMemory><vcpu current='{vcpus}'>4</vcpu>"
        "<os><type>hvm</type></os></domain>"
    )
    return replace(
        rendered("w"),
        xml_data=xml,
        spec_hash=hashlib.sha256(xml.encode()).hexdigest(),
        run_strategy=RunStrategy.ALWAYS,
        rollout=Rollout.RESTART,
    )


def test_plan_defers_a_restart_to_the_window_and_restarts_inside_it() -> None:
    old = _vm(65536, 1)
    new = replace(old, xml_data=old.xml.replace("<vcpu current='1'>4", "<vcpu current='1'>8"))
    new = replace(new, spec_hash=hashlib.sha256(new.xml.encode()).hexdigest())
    policy = PlanPolicy(restart_windows=(NIGHTLY,))
    noon = at("2026-11-25T12:00:00")
    c = build_plan("a" * 40, [new], [running(old)], policy, now=noon).changes[0]
    assert c.action == Action.UPDATE
    assert c.restart_required
    assert "graceful restart in the next restart window, 2026-11-26 02:00 Europe/Berlin" in said(c)
    assert c.restart_window == "2026-11-26 02:00 Europe/Berlin"
    assert changed(c, new).endswith(
        "will be restarted in the next restart window (2026-11-26 02:00 Europe/Berlin)"
    )  # the PR diff's words, from the change's data
    assert c.requeue_after_s == at("2026-11-26T02:00:00") - noon
    inside = at("2026-11-26T02:30:00")
    c = build_plan("a" * 40, [new], [running(old)], policy, now=inside).changes[0]
    assert c.action == Action.RESTART
    now_anyway = replace(policy, restart_now=True)
    assert (
        build_plan("a" * 40, [new], [running(old)], now_anyway, now=noon).changes[0].action == Action.RESTART
    )
    no_clock = build_plan("a" * 40, [new], [running(old)], policy).changes[0]
    assert "0 2 * * * (Europe/Berlin) for 2h" in said(no_clock)


def test_confirm_prune_must_be_a_quoted_sha(tmp_path: Path) -> None:
    cfg = str(tmp_path / "c.yaml")
    c = parse_config(b"source: {repo: /srv/vms}\npolicy:\n  confirmPrune: 'ABCDEF1234'\n", cfg)
    assert c.policy.confirm_prune == "abcdef1234"
    with pytest.raises(ConfigError, match="quote the commit sha"):
        parse_config(b"source: {repo: /srv/vms}\npolicy:\n  confirmPrune: 1234567\n", cfg)
    with pytest.raises(ConfigError, match="not a commit sha"):
        parse_config(b"source: {repo: /srv/vms}\npolicy:\n  confirmPrune: main\n", cfg)


@pytest.mark.parametrize("key", ["confirmPrune", "confirmRollback"])
def test_an_all_digit_sha_unquoted_says_to_quote_it(tmp_path: Path, key: str) -> None:
    # A sha of digits only (1 in ~200 12-digit prefixes) reads as an integer in YAML: the
    # error names the line and says what to write; the daemon's own hints quote it.
    cfg = str(tmp_path / "c.yaml")
    with pytest.raises(ConfigError, match=r"c\.yaml:3:.*quote the commit sha"):
        parse_config(f"source: {{repo: /srv/vms}}\npolicy:\n  {key}: 149076463781\n".encode(), cfg)
    c = parse_config(f"source: {{repo: /srv/vms}}\npolicy:\n  {key}: '149076463781'\n".encode(), cfg)
    assert "149076463781" in (c.policy.confirm_prune, c.policy.confirm_rollback)
