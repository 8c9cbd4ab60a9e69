"""The alerting rules shipped in examples/alerts (for the daemon's /metrics).

Covers: ``promtool check rules`` accepts the file; ``promtool test rules`` passes its
unit tests (host unreachable, revision not applied for 15 minutes, failing reconciles,
drift and crash loop naming the VM, prune refused, refused credentials); every metric a rule reads is
one the daemon exports (reconciler/daemon/metrics.py). promtool comes with Debian's
``prometheus`` package, installed by scripts/setup.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from reconciler.daemon.metrics import Metrics
from tests.helpers.records import row

ALERTS = Path(__file__).resolve().parents[2] / "examples" / "alerts"
PROMTOOL = shutil.which("promtool")


@pytest.mark.parametrize(
    "args", [("check", "rules", "reconciler.rules.yaml"), ("test", "rules", "reconciler.rules.test.yaml")]
)
def test_promtool_accepts_the_rules(args: tuple[str, ...]) -> None:
    assert PROMTOOL is not None, "promtool missing: run scripts/setup (Debian's prometheus package)"
    done = subprocess.run([PROMTOOL, *args], cwd=ALERTS, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_rule_reads_a_metric_the_daemon_exports() -> None:
    m = Metrics()
    m.observe("h", "Succeeded", 0.1, [row("web", host="h")])
    for gauge in (m.hosts_up, m.revision_applied, m.prune_refused):
        gauge.labels("h").set(1)
    m.notifications.labels("d", "sent").inc()
    m.errors.labels("h", "BuildFailed").inc()
    exported = set(
        re.findall(r"^(reconciler_\w+?)(?:_bucket|_count|_sum|_created)?[{ ]", m.render().decode(), re.M)
    )
    rules = yaml.safe_load((ALERTS / "reconciler.rules.yaml").read_text())["groups"][0]["rules"]
    read = {name for r in rules for name in re.findall(r"\breconciler_\w+", r["expr"])}
    assert len(rules) == 7
    assert read <= exported, read - exported
