"""Commit statuses on the forges and the background sender (reconciler/daemon/forge.py,
outbox.py, config/notify.py).

Covers: every request for GitHub, GitLab, Gitea and Forgejo, sent over HTTP to a local
receiver, matches the forge's published API description pinned in tests/data/forges
(method, path and its parameters, body schema: required fields, state enums) and carries
the forge's kind of token; the description says the reason and the first error; the
provider, API root and repository inferred from the remote URL, and a local repository
without them an error at file:line; the token in no repr, log line or error; retries
back off on the given clock and give up; a 401 is one warning and a metric, not retried;
a newer status of the same context replaces a waiting one; a full queue drops, counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import structlog

from reconciler.config.daemon_file import parse_config
from reconciler.daemon import forge
from reconciler.daemon.outbox import MAX_ATTEMPTS, Outbox, Request, backoff
from reconciler.errors import ConfigError
from tests.helpers.clock import FakeClock
from tests.helpers.receiver import Receiver, load_operation, openapi_check

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TOKEN = "tok-3f9a1c-SECRET"
SHA = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"

# provider -> (API root below the receiver, pinned excerpt, prefix of its paths, auth header)
FORGES = {
    "github": ("", "github-create-commit-status.json", "", ("Authorization", f"Bearer {TOKEN}")),
    "gitlab": ("/api/v4", "gitlab-post-statuses.json", "", ("Private-Token", TOKEN)),
    "gitea": ("/api/v1", "gitea-repo-create-status.json", "/api/v1", ("Authorization", f"token {TOKEN}")),
    "forgejo": ("/api/v1", "gitea-repo-create-status.json", "/api/v1", ("Authorization", f"token {TOKEN}")),
}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def config_text(tmp_path: Path, notify: str, repo: str = "https://git.example.com/infra/vms.git") -> Any:
    (tmp_path / "forge.token").write_text(TOKEN + "\n")
    text = f"source:\n  repo: {repo}\nnotify:\n{notify}"
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return parse_config(text.encode(), str(path))


@pytest.mark.parametrize("provider", sorted(FORGES))
def test_status_requests_match_the_published_api(tmp_path: Path, receiver: Receiver, provider: str) -> None:
    root, pinned, prefix, (header, value) = FORGES[provider]
    cfg = config_text(
        tmp_path,
        f"  commitStatus:\n    provider: {provider}\n    baseURL: {receiver.url}{root}\n"
        f"    repository: infra/vms\n    tokenFile: forge.token\n    targetURL: http://127.0.0.1:9469/\n",
    )
    cs = cfg.notify.commit_status
    assert cs is not None
    box = Outbox(FakeClock())
    box.put(forge.status_request(cs, SHA, "host1", forge.PENDING, forge.description("host1", "", "")))
    box.put(
        forge.status_request(cs, SHA, "host2", forge.SUCCESS, forge.description("host2", "Succeeded", ""))
    )
    failed = forge.description("host3", "BuildFailed", "vms/web.yaml:12:5: unknown field 'cpus'\nmore")
    box.put(forge.status_request(cs, SHA, "host3", forge.FAILURE, failed))
    assert box.pump() is None  # all sent
    doc = load_operation(pinned)
    got = receiver.requests()
    assert len(got) == 3
    states, contexts = [], []
    for g in got:
        params = openapi_check(doc, g, prefix)
        assert params["sha"] == SHA
        assert g.headers[header] == value
        body = g.json()
        states.append(body["state"])
        contexts.append(body.get("context") or body.get("name"))
        assert body["target_url"] == "http://127.0.0.1:9469/"
    assert contexts == ["reconciler/host3", "reconciler/host2", "reconciler/host1"]  # newest first
    assert states == ["failed" if provider == "gitlab" else "failure", "success", "pending"]
    assert got[0].json()["description"] == "host3: BuildFailed: vms/web.yaml:12:5: unknown field 'cpus'"
    if provider == "gitlab":
        assert openapi_check(doc, got[0], prefix)["id"] == "infra%2Fvms"
    else:
        assert openapi_check(doc, got[0], prefix)["owner"] == "infra"


def test_a_request_the_api_does_not_take_is_caught(tmp_path: Path, receiver: Receiver) -> None:
    """The check itself fails on a body the description refuses (an unknown state)."""
    cfg = config_text(
        tmp_path,
        f"  commitStatus:\n    provider: github\n    baseURL: {receiver.url}\n    tokenFile: forge.token\n",
    )
    cs = cfg.notify.commit_status
    req = forge.status_request(cs, SHA, "h", forge.SUCCESS, "x")
    bad = Request(
        req.method, req.url, req.body.replace(b'"success"', b'"applied"'), req.headers, req.label, req.what
    )
    box = Outbox(FakeClock())
    box.put(bad)
    box.pump()
    with pytest.raises(Exception, match="applied"):
        openapi_check(load_operation("github-create-commit-status.json"), receiver.requests()[0], "")


@pytest.mark.parametrize(
    ("repo", "provider", "base", "repository"),
    [
        ("https://github.com/acme/vms.git", "github", "https://api.github.com", "acme/vms"),
        ("git@github.example.com:acme/vms.git", "github", "https://github.example.com/api/v3", "acme/vms"),
        (
            "ssh://git@gitlab.example.com:2222/grp/sub/vms.git",
            "gitlab",
            "https://gitlab.example.com/api/v4",
            "grp/sub/vms",
        ),
        ("https://codeberg.org/acme/vms", "forgejo", "https://codeberg.org/api/v1", "acme/vms"),
        ("https://gitea.example.com/acme/vms.git", "gitea", "https://gitea.example.com/api/v1", "acme/vms"),
    ],
)
def test_provider_and_repository_inferred_from_the_remote(
    tmp_path: Path, repo: str, provider: str, base: str, repository: str
) -> None:
    cfg = config_text(tmp_path, "  commitStatus: {tokenFile: forge.token}\n", repo=repo)
    cs = cfg.notify.commit_status
    assert (cs.provider, cs.base_url, cs.repository, cs.context) == (
        provider,
        base,
        repository,
        "reconciler/{host}",
    )
    assert TOKEN not in repr(cfg)


@pytest.mark.parametrize(
    ("notify", "repo", "message"),
    [
        (
            "  commitStatus: {tokenFile: forge.token}\n",
            "/srv/vms",
            "config.yaml:4:3: notify.commitStatus.provider",
        ),
        (
            "  commitStatus: {provider: gitea, tokenFile: forge.token}\n",
            "/srv/vms",
            "config.yaml:4:3: notify.commitStatus.baseURL",
        ),
        (
            "  commitStatus: {provider: github}\n",
            "https://github.com/a/b",
            "notify.commitStatus.tokenFile: required",
        ),
        (
            "  commitStatus: {tokenFile: forge.token, provider: bitbucket}\n",
            "https://x.org/a/b",
            "config.yaml:4:52: notify.commitStatus.provider: 'bitbucket'",
        ),
        (
            "  slack: [{urlFile: nope}]\n",
            "https://x.org/a/b",
            "notify.slack[0].urlFile: nope is not a readable file",
        ),
        ("  webhooks: [{url: ftp://x/y}]\n", "https://x.org/a/b", "config.yaml:4:20: notify.webhooks[0].url"),
        (
            "  webhooks: [{url: 'https://x/y', events: [appled]}]\n",
            "https://x.org/a/b",
            "unknown kind 'appled'",
        ),
        ("  rateLimit: 0\n", "https://x.org/a/b", "config.yaml:4:14: notify.rateLimit"),
    ],
)
def test_bad_notify_settings_name_file_and_line(tmp_path: Path, notify: str, repo: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_text(tmp_path, notify, repo=repo)
    assert message in str(err.value)
    assert TOKEN not in str(err.value)


def test_retries_back_off_on_the_clock_then_give_up() -> None:
    clock = FakeClock()
    sent: list[float] = []
    results: list[str] = []

    def down(req: Request) -> int:
        sent.append(clock.monotonic())
        raise OSError("connection refused")

    box = Outbox(clock, send=down, on_result=lambda label, result: results.append(result))
    box.put(Request("POST", "http://127.0.0.1:9/x", b"{}", {}, "webhook[0] 127.0.0.1", "failed h"))
    for attempt in range(1, MAX_ATTEMPTS + 1):
        wait = box.pump()
        assert len(sent) == attempt
        if attempt < MAX_ATTEMPTS:
            assert wait == backoff(attempt)
            clock.advance(wait - 0.5)
            assert box.pump() == 0.5  # not yet due: nothing sent
            assert len(sent) == attempt
            clock.advance(0.5)
    assert results == ["retry"] * (MAX_ATTEMPTS - 1) + ["gave-up"]
    assert len(box) == 0
    assert [backoff(a) for a in (1, 2, 3, 9, 20)] == [2.0, 4.0, 8.0, 300.0, 300.0]


def test_wrong_token_is_one_warning_and_a_metric_and_never_logged(tmp_path: Path) -> None:
    receiver = Receiver(default=401)
    try:
        cfg = config_text(tmp_path, f"  commitStatus:\n    provider: gitea\n    baseURL: {receiver.url}/api/v1\n"
                                    f"    repository: a/b\n    tokenFile: forge.token\n")  # fmt: skip
        results: list[tuple[str, str]] = []
        box = Outbox(FakeClock(), on_result=lambda label, result: results.append((label, result)))
        with structlog.testing.capture_logs() as logs:
            for host in ("h1", "h2", "h3"):
                box.put(forge.status_request(cfg.notify.commit_status, SHA, host, forge.PENDING, "x"))
            assert box.pump() is None  # not retried
    finally:
        receiver.close()
    assert len(receiver.requests()) == 3
    assert results == [("gitea 127.0.0.1", "unauthorized")] * 3
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1
    assert "wrong or expired token" in warnings[0]["event"]
    assert TOKEN not in repr(logs)


def test_a_newer_status_replaces_a_waiting_one_and_the_queue_is_bounded() -> None:
    sent: list[str] = []
    results: list[str] = []

    def send(r: Request) -> int:
        sent.append(r.what)
        return 201

    box = Outbox(FakeClock(), send=send, on_result=lambda lb, res: results.append(res), capacity=2)

    def req(what: str, key: str) -> Request:
        return Request("POST", "http://x/", b"", {}, "t", what, key=key)

    assert box.put(req("pending", "status sha ctx"))
    assert box.put(req("success", "status sha ctx"))  # same key: replaces
    assert box.put(req("other", "k2"))
    assert not box.put(req("third", "k3"))  # full
    box.pump()
    assert sent == ["success", "other"]
    assert results == ["dropped", "sent", "sent"]
