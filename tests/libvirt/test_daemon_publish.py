"""What the daemon reports after its reconciles, in-process on test:///default
(reconciler/daemon/publish.py through service.py).

Covers: a new commit is pending then success for the host's context, a broken one
pending then failure with the reason and the first error's file:line, a resync of the
same revision or a fetch that failed sends nothing again; the reconcile never waits for the forge (requests
wait in the outbox until its worker sends them); notifications to a generic webhook
are valid against the shipped JSON Schema and signed so that the daemon's own webhook
check accepts them; the status document lists the VMs
with their sync state and the errors with file:line, and links revisions to the forge.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import TYPE_CHECKING

import jsonschema
import pytest

from reconciler.config.notify import CommitStatusConfig, NotifyConfig, Sink
from reconciler.daemon.http import signature_ok
from reconciler.daemon.scheduler import REFS, RESYNC
from reconciler.model.results import Reason, ReconcileStatus
from tests.helpers.loop import Daemons
from tests.helpers.manifests import vm_yaml
from tests.helpers.receiver import Receiver, load_operation, openapi_check

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from reconciler.daemon.runner import HostRunner
    from reconciler.daemon.service import Daemon
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

DAEMONS = Daemons("pub-")
SECRET = b"hook-secret"


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    yield
    DAEMONS.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(default=201)
    yield r
    r.close()


def daemon(git_repo: GitRepo, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> Daemon:
    notify = NotifyConfig(
        commit_status=CommitStatusConfig("github", receiver.url, "infra/vms", "tok-secret"),
        sinks=(Sink("webhook", f"{receiver.url}/hook", "webhook[0] 127.0.0.1", SECRET),),
    )
    d = DAEMONS.make(git_repo, tmp_path / "s")
    d.config = dataclasses.replace(d.config, notify=notify)
    d.publish.reload(d.config)
    d.publish.commit_link = "https://git.example.com/infra/vms/commit/{sha}"
    started = d.publish.started

    def sends_at_once(head: str, hosts: list[HostRunner]) -> None:
        """As the outbox's worker does when the forge answers before the reconcile ends."""
        started(head, hosts)
        d.publish.outbox.pump()

    monkeypatch.setattr(d.publish, "started", sends_at_once)
    return d


def sent(receiver: Receiver, d: Daemon) -> tuple[list[dict[str, str]], list[dict[str, object]]]:
    d.publish.outbox.pump()
    statuses = [g.json() for g in receiver.requests() if "/statuses/" in g.path]
    hooks = [g for g in receiver.requests() if g.path == "/hook"]
    schema = json.loads(resources.files("reconciler").joinpath("data/notify/event.schema.json").read_text())
    for g in hooks:
        assert signature_ok(SECRET, g.body, g.headers) == (True, "hmac-sha256")
        jsonschema.validate(g.json(), schema)
    return statuses, [g.json() for g in hooks]


def test_commit_status_and_events_follow_the_reconciles(
    tmp_path: Path, git_repo: GitRepo, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo.write("vms/a.yaml", vm_yaml("pub-a"))
    good = git_repo.commit()
    d = daemon(git_repo, tmp_path, receiver, monkeypatch)
    d.step({REFS})
    assert d.applied == good
    # the outcome was not sent by the reconcile: it waits in the outbox for the worker
    assert [g.json()["state"] for g in receiver.requests()] == ["pending"]
    assert len(d.publish.outbox) == 2
    statuses, hooks = sent(receiver, d)
    assert [(s["state"], s["context"], s["description"]) for s in statuses] == [
        ("pending", "reconciler/localhost", "localhost: reconciling"),
        ("success", "reconciler/localhost", "localhost: applied"),
    ]
    doc = load_operation("github-create-commit-status.json")
    assert all(
        openapi_check(doc, g, "")["sha"] == good for g in receiver.requests() if "/statuses/" in g.path
    )
    assert [(h["kind"], h["host"], h["revision"]) for h in hooks] == [("applied", "localhost", good)]
    assert hooks[0]["link"] == f"https://git.example.com/infra/vms/commit/{good}"

    d.step({RESYNC})  # the same revision again: nothing new to say
    assert sent(receiver, d) == (statuses, hooks)
    fetch_failed = ReconcileStatus(Reason.SOURCE_FAILED, good, "", 0.0, 0, message="fetch failed: timeout")
    d.publish.recorded(d.hosts, fetch_failed, {}, None)  # names no commit: the success stands
    assert sent(receiver, d) == (statuses, hooks)

    git_repo.write(
        "vms/b.yaml", "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: pub-b}\nspec: [\n"
    )
    bad = git_repo.commit()
    d.step({REFS})
    assert d.attempted == bad
    assert d.applied == good
    statuses, hooks = sent(receiver, d)
    assert [s["state"] for s in statuses[2:]] == ["pending", "failure"]
    assert statuses[3]["description"].startswith("localhost: BuildFailed: vms/b.yaml:")
    assert [(h["kind"], h["reason"]) for h in hooks[1:]] == [("failed", "BuildFailed")]
    assert "vms/b.yaml:" in str(hooks[1]["message"])
    d.step({RESYNC})  # a revision that failed to build is not tried again: nothing new
    assert len(sent(receiver, d)[1]) == 2

    page = d.publish.document
    assert page["schemaVersion"] == 1
    assert page["attempted"] == {"revision": bad, "link": f"https://git.example.com/infra/vms/commit/{bad}"}
    assert page["applied"]["revision"] == good
    (host,) = page["hosts"]
    assert host["reason"] == "BuildFailed"
    assert any(e.startswith("vms/b.yaml:") for e in [host["message"], *host["errors"]])
    # The last applied revision is held and enforced: its VM is in sync with it, and says so.
    (row,) = [v for v in host["vms"] if v["name"] == "pub-a"]
    assert (row["sync"], row["message"][:21]) == ("Synced", f"held at {good[:12]} ")
    assert host["held"] == {"enforced": good, "blocked": bad, "reason": "BuildFailed"}
    # Equal outcomes fold into one entry: the same BuildFailed twice, the same success twice.
    assert [(e["result"], e["count"]) for e in page["history"][:2]] == [("BuildFailed", 2), ("Succeeded", 2)]
    assert "tok-secret" not in json.dumps(page)
