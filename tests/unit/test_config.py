"""The daemon configuration file (reconciler/config/daemon.py).

Covers: a full file parsed into DaemonConfig; single host vs a hosts list; durations;
defaults; flags overriding the file; running with flags only when the default file
is missing; every kind of bad input reported with file:line:col (unknown keys at
any level, bad values, bad durations, duplicate hosts, host-config errors inside the
embedded host section, YAML syntax errors); remote URL detection; listen parsing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.config.daemon import DEFAULT_LISTEN, DaemonConfig, Overrides, parse_listen, resolved_policy
from reconciler.config.daemon_file import load_config, parse_config
from reconciler.errors import ConfigError
from reconciler.model.identifiers import is_remote_url
from reconciler.model.rollout import OnFailure, Pacing

FULL = """\
source:
  repo: https://git.example.com/infra/vms.git
  branch: main
  path: overlays/prod
  credentials:
    username: deploy
    passwordFile: token
  verify:
    mode: ssh
    keys: allowed_signers
hosts:
  - connect: qemu:///system
    host:
      name: host1
  - connect: qemu+ssh://root@host2/system
    host:
      name: host2
      claimUnselected: false
policy:
  prune: true
  maxPrunePercent: 10
  selfHeal: false
  rollout: Restart
  instancetypeRevisions: follow
intervals:
  fetch: 30s
  resync: 5m
listen: 127.0.0.1:9999
webhook:
  secretFile: hook.secret
stateDir: /srv/reconciler
log:
  format: json
  level: debug
"""


@pytest.fixture
def confdir(tmp_path: Path) -> Path:
    (tmp_path / "token").write_text("s3cret\n")
    (tmp_path / "allowed_signers").write_text("a@example.invalid ssh-ed25519 AAAA\n")
    (tmp_path / "hook.secret").write_text("hooksecret\n")
    return tmp_path


def parse(confdir: Path, text: str) -> DaemonConfig:
    path = confdir / "config.yaml"
    path.write_text(text)
    return parse_config(text.encode(), str(path))


def test_full_file(confdir: Path) -> None:
    c = parse(confdir, FULL)
    assert c.source.repo == "https://git.example.com/infra/vms.git"
    assert c.source.remote
    assert (c.source.branch, c.source.path) == ("main", "overlays/prod")
    assert c.source.credentials.username == "deploy"
    assert c.source.credentials.password_file == str(confdir / "token")
    assert c.source.verify is not None
    assert (c.source.verify.mode, c.source.verify.keys) == ("ssh", str(confdir / "allowed_signers"))
    assert [(h.uri, h.config.name) for h in c.hosts] == [
        ("qemu:///system", "host1"),
        ("qemu+ssh://root@host2/system", "host2"),
    ]
    assert c.hosts[1].config.claim_unselected is False
    assert (c.policy.prune, c.policy.max_prune_percent, c.policy.self_heal) == (True, 10, False)
    assert (c.fetch_interval_s, c.resync_interval_s) == (30.0, 300.0)
    assert c.listen == "127.0.0.1:9999"
    assert c.webhook_secret == b"hooksecret"
    assert "hooksecret" not in repr(c)
    assert c.state_dir == "/srv/reconciler"
    assert (c.log_format, c.log_level) == ("json", "debug")
    host = resolved_policy(c, c.hosts[0].config)
    assert (host.rollout, host.instancetype_revisions) == ("Restart", "follow")


def test_defaults_and_single_host(confdir: Path) -> None:
    c = parse(confdir, "source: {repo: /srv/vms}\nconnect: qemu:///system\nhost: {name: h1}\n")
    assert not c.source.remote
    assert [(h.uri, h.config.name) for h in c.hosts] == [("qemu:///system", "h1")]
    assert (c.fetch_interval_s, c.resync_interval_s) == (60.0, 30.0)
    assert c.listen == DEFAULT_LISTEN
    assert c.state_dir == "/var/lib/reconciler"
    assert not c.policy.prune
    assert c.policy.max_prune_percent == 30
    assert c.policy.self_heal
    assert c.webhook_secret == b""


def test_relative_local_repo_is_relative_to_the_config_file(confdir: Path) -> None:
    c = parse(confdir, "source: {repo: vms}\n")
    assert c.source.repo == str(confdir / "vms")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("90", 90.0), ("1.5", 1.5), ("500ms", 0.5), ("45s", 45.0), ("2m", 120.0), ("1h", 3600.0)],
)
def test_durations(confdir: Path, value: str, seconds: float) -> None:
    c = parse(confdir, f"source: {{repo: /r}}\nintervals:\n  resync: {value}\n")
    assert c.resync_interval_s == seconds


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("source: {repo: /r}\nbogus: 1\n", "2:1", "unknown key 'bogus'"),
        (
            "source: {repo: /r}\npolicy:\n  prune: true\n  maxPrunePercnt: 3\n",
            "4:3",
            "unknown key 'maxPrunePercnt'",
        ),
        ("source:\n  repo: /r\n  brnch: main\n", "3:3", "unknown key 'brnch'"),
        (
            "source: {repo: /r}\npolicy:\n  prune: yes please\n",
            "3:10",
            "policy.prune: expected true or false",
        ),
        ("source: {repo: /r}\npolicy:\n  maxPrunePercent: 130\n", "3:20", "not an integer from 0 to 100"),
        ("source: {repo: /r}\npolicy:\n  rollout: Later\n", "3:12", "'Later' is not one of Stage, Restart"),
        ("source: {repo: /r}\nintervals:\n  fetch: soon\n", "3:10", "not a positive duration"),
        ("source: {repo: /r}\nintervals:\n  fetch: 0\n", "3:10", "not a positive duration"),
        ("source: {repo: /r}\nlisten: localhost\n", "2:9", "is not HOST:PORT"),
        ("source: {repo: /r}\nstateDir: relative/dir\n", "2:11", "must be an absolute path"),
        ("source: {repo: /r}\nlog:\n  format: xml\n", "3:11", "'xml' is not one of"),
        ("source:\n  branch: main\n", "1:1", "source.repo: required"),
        (
            "source:\n  repo: /r\n  verify:\n    mode: pgp\n    keys: k\n",
            "4:11",
            "'pgp' is not one of gpg, ssh",
        ),
        ("source:\n  repo: /r\n  verify:\n    mode: ssh\n    keys: missing\n", "5:11", "not a readable file"),
        ("source: {repo: /r}\nwebhook:\n  secretFile: nope\n", "3:15", "not a readable file"),
        ("source: {repo: /r}\nhosts:\n  - host: {name: a}\n", "3:5", "hosts[0].connect: required"),
        (
            "source: {repo: /r}\nhosts:\n  - connect: test:///default\n  - connect: test:///default\n",
            "4:14",
            "listed twice",
        ),
        (
            "source: {repo: /r}\nhosts:\n  - connect: test:///default\n  - connect: qemu:///system\n",
            "4:5",
            "host name 'localhost' is used twice",
        ),
        ("source: {repo: /r}\nconnect: qemu:///system\nhosts: []\n", "3:1", "give either hosts or connect"),
        ("source: {repo: /r}\nhost:\n  name: h\n  colour: blue\n", "4:3", "unknown key 'colour'"),
        ("source: {repo: /r}\nhost:\n  rollout: Never\n", "3:12", "'Never' is not one of"),
        ("source: {repo: /r}\npolicy: [1, 2]\n", "2:9", "policy: expected a mapping"),
        ("source: {repo: /r}\npolicy:\n  maxUnavailable: 120%\n", "3:19", "is not a count or a percentage"),
        ("source: {repo: /r}\npolicy:\n  progressDeadline: soon\n", "3:21", "policy.progressDeadline"),
        ("source: {repo: /r}\npolicy:\n  onFailure: retry\n", "3:14", "'retry' is not one of halt, revert"),
        ("source: {repo: /r\n", "2:1", "invalid YAML"),
        ("- just\n- a list\n", "1:1", "expected a mapping at the top level"),
    ],
)
def test_bad_input_names_file_and_line(confdir: Path, text: str, where: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(confdir, text)
    err = info.value
    assert str(err).startswith(f"{confdir / 'config.yaml'}:{where}: "), str(err)
    assert message in str(err)


def test_credentials_need_a_remote(confdir: Path) -> None:
    with pytest.raises(ConfigError, match="only a remote repository takes credentials"):
        parse(confdir, "source:\n  repo: /local\n  credentials: {passwordFile: token}\n")


def test_flags_override_the_file(confdir: Path) -> None:
    path = confdir / "config.yaml"
    path.write_text(FULL)
    o = Overrides(
        repo=str(confdir / "other"),
        branch="release",
        path="overlays/dev",
        connect="test:///default",
        state_dir=str(confdir / "state"),
        listen="127.0.0.1:0",
        prune=False,
    )
    c = load_config(str(path), o)
    assert c.source.repo == str(confdir / "other")
    assert not c.source.remote
    assert (c.source.branch, c.source.path) == ("release", "overlays/dev")
    assert [h.uri for h in c.hosts] == ["test:///default"]
    assert c.state_dir == str(confdir / "state")
    assert c.listen == "127.0.0.1:0"
    assert c.policy.prune is False
    assert c.policy.max_prune_percent == 10  # untouched by flags


def test_flags_only_when_the_default_file_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("reconciler.config.daemon.DEFAULT_CONFIG", str(tmp_path / "absent.yaml"))
    c = load_config(None, Overrides(repo=".", connect="test:///default", state_dir=str(tmp_path)))
    assert c.source.repo == str(Path.cwd())
    assert c.path == ""
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(None, Overrides())
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(str(tmp_path / "named-but-missing.yaml"), Overrides(repo="."))


def test_a_file_without_a_source_needs_repo_flag(confdir: Path) -> None:
    path = confdir / "config.yaml"
    path.write_text("connect: test:///default\n")
    with pytest.raises(ConfigError, match="no source repository"):
        load_config(str(path))
    assert load_config(str(path), Overrides(repo="/srv/vms")).source.repo == "/srv/vms"


@pytest.mark.parametrize(
    ("url", "remote"),
    [
        ("https://example.com/r.git", True),
        ("ssh://git@example.com/r.git", True),
        ("file:///srv/r.git", True),
        ("git@example.com:infra/r.git", True),
        ("/srv/vms", False),
        ("./vms", False),
        ("vms:odd", False),
    ],
)
def test_remote_urls(url: str, remote: bool) -> None:
    assert is_remote_url(url) is remote


@pytest.mark.parametrize(
    ("value", "expected"),
    [("127.0.0.1:9469", ("127.0.0.1", 9469)), ("[::1]:80", ("::1", 80)), (":8080", ("127.0.0.1", 8080))],
)
def test_parse_listen(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["localhost", "host:port", "1.2.3.4:70000"])
def test_parse_listen_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(value)


def test_pacing_policy_is_read(confdir: Path) -> None:
    text = "source: {repo: /r}\npolicy:\n  maxUnavailable: 2\n  progressDeadline: 5m\n  onFailure: revert\n"
    p = parse(confdir, text).policy.pacing
    assert (p.max_unavailable, p.progress_deadline_s, p.on_failure) == ("2", 300.0, OnFailure.REVERT)
    assert parse(confdir, "source: {repo: /r}\n").policy.pacing == Pacing()  # 25%, 10m, halt
