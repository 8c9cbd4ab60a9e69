"""No Secret value in any word the project prints: a property over commands and channels.

Covers: Secrets with random values (hypothesis) planted in every source a value comes
from — a Secret's ``data`` and ``stringData``, a ``secretGenerator``'s literal, file
and env file, a host directory, a SOPS-encrypted Secret and a SOPS-encrypted generator
file — in a repository whose base commit works and whose head commit is broken in one
way (JSON 6902 ``test``, a wrong path, an index into a string, a strategic merge of the
wrong kind, a replacement index out of range, a replacement into a VM, a missing
source field, a patch selecting nothing, a schema error, bad base64, broken YAML, a
duplicate key, an env line without ``=``, a literal without ``=``, a non-UTF-8 env
file, a tampered SOPS file, data that is no map, a value that is no string) or not
broken. Every command is run over it as a user runs it: ``build`` (work tree and
``--ref``), ``expand`` (YAML and JSON), ``render``, ``validate`` (text and JSON), ``diff``
(text, ``-v``, Markdown, JSON; with the key and without), ``plan`` (text, JSON, the saved
plan file), ``apply``, ``status`` (table and JSON), and the daemon (its JSON log,
state.json, its message, ``/healthz``, ``/livez`` and ``/metrics``, ``reconciler status``
from its state). Every output channel — stdout, stderr, logs, JSON, Markdown, the saved
plan, state.json, metrics, HTTP bodies and the domain XML (persistent and running)
libvirt holds, the notifications queued for the forge, webhooks, Slack and Alertmanager —
is scanned for each value, its base64, and every 8-character piece of
either. The scan is shown to catch a value where one is printed: ``build --show-secrets``
prints them all.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import string
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import structlog
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from reconciler import cli
from reconciler.config.daemon import Overrides
from reconciler.config.daemon_file import load_config
from reconciler.daemon.http import HttpServer
from reconciler.daemon.metrics import CONTENT_TYPE
from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import RESYNC
from reconciler.daemon.service import Daemon
from reconciler.host.hypervisor import Hypervisor
from reconciler.log import setup_logging
from tests.helpers.clock import FakeClock
from tests.helpers.git import GitRepo
from tests.helpers.sops import age_key, encrypt

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.timeout(600)

PREFIX = "leak-"
URI = "test:///default"
SOURCES = ("data", "stringData", "literal", "file", "env", "host", "sops", "sopsFile")
BREAKAGES = (
    "none",
    "json6902-test",
    "json6902-path",
    "json6902-index",
    "smp-kind",
    "replacement-index",
    "replacement-into-vm",
    "replacement-missing",
    "selector-none",
    "schema",
    "base64",
    "yaml",
    "duplicate-key",
    "env-line",
    "literal-form",
    "env-not-utf8",
    "sops-tampered",
    "data-not-map",
    "value-not-string",
)
# Random values: letters and digits, long enough that an 8-character piece of one is
# found nowhere by chance (the project's own digests are hex or base64 of other bytes).
VALUE = st.text(alphabet=string.ascii_letters + string.digits, min_size=24, max_size=32).filter(
    lambda v: len(set(v)) >= 12
)
VALUES = st.fixed_dictionaries(dict.fromkeys(SOURCES, VALUE))

VMS = f"""apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {PREFIX}web
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        memory: {{guest: {{memory}}}}
        devices:
          disks:
            - {{name: cidata, disk: {{bus: virtio}}}}
            - {{name: gen, disk: {{bus: virtio}}}}
            - {{name: sops, disk: {{bus: virtio}}}}
            - {{name: sopsgen, disk: {{bus: virtio}}}}
            - {{name: host, disk: {{bus: virtio}}}}
      volumes:
        - name: cidata
          cloudInitNoCloud:
            secretRef: {{name: db-creds}}
        - {{name: gen, secret: {{secretName: gen}}}}
        - {{name: sops, secret: {{secretName: sops-creds}}}}
        - {{name: sopsgen, secret: {{secretName: sopsgen}}}}
        - {{name: host, secret: {{secretName: hostsecret}}}}
"""
NAMEREFS = """nameReference:
  - kind: Secret
    fieldSpecs:
      - {path: spec/template/spec/volumes/secret/secretName, kind: VirtualMachine}
      - {path: spec/template/spec/volumes/cloudInitNoCloud/secretRef/name, kind: VirtualMachine}
"""


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def forbidden(values: dict[str, str]) -> set[str]:
    """Every value, its base64, and every 8-character piece of either."""
    out: set[str] = set()
    for v in values.values():
        for form in (v, b64(v)):
            out |= {form[i : i + 8] for i in range(len(form) - 7)}
    return out


def leaks(channels: dict[str, str], pieces: set[str]) -> list[str]:
    return [f"{name}: {p!r}" for name, text in channels.items() for p in sorted(pieces) if p in text]


# -- the repository ------------------------------------------------------------------------------


def secret_yaml(v: dict[str, str], breakage: str) -> str:
    data = f"{v['data']}!!" if breakage == "base64" else b64(v["data"])
    lines = [
        "apiVersion: v1",
        "kind: Secret",
        "metadata: {name: db-creds}",
        f"data: {v['data']}" if breakage == "data-not-map" else f"data:\n  d: {data}",
        "stringData:",
        "  userdata: '#cloud-config'",  # what cloud-init's secretRef reads
        f"  s: [{v['stringData']}]" if breakage == "value-not-string" else f"  s: {v['stringData']}",
    ]
    if breakage == "duplicate-key":
        lines.append(f"  s: {v['stringData'][::-1]}")
    if breakage == "yaml":
        lines.append("  t: [unclosed")
    return "\n".join(lines) + "\n"


def kustomization(v: dict[str, str], breakage: str) -> str:
    literal = v["literal"] if breakage == "literal-form" else f"lit={v['literal']}"
    text = (
        "resources: [vms.yaml, secret.yaml, sops-secret.yaml]\n"
        "configurations: [namerefs.yaml]\n"
        "secretGenerator:\n"
        f"  - {{name: gen, literals: [{literal}], files: [file=file.txt], envs: [env.env]}}\n"
        "  - {name: sopsgen, files: [blob=blob.bin]}\n"
    )
    patch = {
        "json6902-test": "- {op: test, path: /stringData/s, value: wrong}",
        "json6902-path": "- {op: replace, path: /data/nothere/x, value: y}",
        "json6902-index": "- {op: replace, path: /stringData/s/0, value: y}",
    }.get(breakage)
    if patch:
        text += f"patches:\n  - target: {{kind: Secret, name: db-creds}}\n    patch: |-\n      {patch}\n"
    if breakage == "smp-kind":
        text += "patches:\n  - patch: |-\n      {apiVersion: v1, kind: Secret, metadata: {name: db-creds}, stringData: [x]}\n"
    if breakage == "selector-none":
        text += (
            "patches:\n  - target: {kind: Secret, name: nothere}\n    patch: '- {op: remove, path: /data}'\n"
            "  - patch: '{apiVersion: v1, kind: Secret, metadata: {name: nothere}, data: {}}'\n"
        )
    source = {
        "replacement-index": "{kind: Secret, name: db-creds, fieldPath: stringData.s, options: {delimiter: '-', index: 3}}",
        "replacement-into-vm": "{kind: Secret, name: db-creds, fieldPath: stringData.s}",
        "replacement-missing": "{kind: Secret, name: db-creds, fieldPath: stringData.nothere}",
    }.get(breakage)
    if source:
        target = "VirtualMachine" if breakage == "replacement-into-vm" else "Secret, name: sops-creds"
        text += (
            f"replacements:\n  - source: {source}\n    targets:\n"
            f"      - select: {{kind: {target}}}\n        fieldPaths: [metadata.annotations.copied]\n"
            "        options: {create: true}\n"
        )
    return text


def write_revision(repo: GitRepo, v: dict[str, str], recipient: str, breakage: str) -> str:
    repo.write("vms.yaml", VMS.replace("{memory}", "banana" if breakage == "schema" else "64Mi"))
    repo.write("namerefs.yaml", NAMEREFS)
    repo.write("kustomization.yaml", kustomization(v, breakage))
    repo.write("secret.yaml", secret_yaml(v, breakage))
    repo.write("file.txt", v["file"])
    env = f"E={v['env']}\n" + (f"{v['env'][::-1]}\n" if breakage == "env-line" else "")
    (repo.path / "env.env").write_bytes(env.encode() + (b"\xff\n" if breakage == "env-not-utf8" else b""))
    sops_secret = encrypt(
        f"apiVersion: v1\nkind: Secret\nmetadata: {{name: sops-creds}}\nstringData: {{s: {v['sops']}}}\n",
        recipient,
    )
    if breakage == "sops-tampered":
        sops_secret = sops_secret.replace(b"name: sops-creds", b"name: sops-credz")
    (repo.path / "sops-secret.yaml").write_bytes(sops_secret)
    (repo.path / "blob.bin").write_bytes(encrypt(v["sopsFile"], recipient, "binary"))
    return repo.commit(breakage)


# -- running everything --------------------------------------------------------------------------


@contextlib.contextmanager
def environment(**values: str | None) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, val in values.items():
            if val is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = val
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def run(channels: dict[str, str], name: str, *argv: str) -> int:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    channels[f"{name} stdout"] = out.getvalue()
    channels[f"{name} stderr"] = err.getvalue()
    return code


def http_bodies(d: Daemon, paths: tuple[str, ...]) -> dict[str, str]:
    """What the daemon's HTTP listener serves at ``paths``: its server, wired as the
    daemon wires it, answering one request at a time (no serving thread to wait for)."""
    wired = d.listeners
    server = HttpServer(
        d.config.listen,
        secret=lambda: b"",
        on_push=lambda: None,
        health=wired._health,
        metrics=lambda: (d.metrics.render(), CONTENT_TYPE),
        live=wired._live,
        status=wired._status,
    )
    out = {}
    try:
        for path in paths:
            answer = threading.Thread(target=server.server.handle_request)
            answer.start()
            try:
                with urllib.request.urlopen(f"http://{server.address}{path}", timeout=10) as resp:
                    out[path] = resp.read().decode()
            except urllib.error.HTTPError as err:
                out[path] = err.read().decode()
            answer.join(timeout=10)
    finally:
        server.server.server_close()
    return out


def drop_domains() -> None:
    with Hypervisor(URI) as hv:
        for dom in hv.list_domains():
            if dom.name.startswith(PREFIX):
                if dom.active:
                    hv.destroy(dom.name)
                hv.undefine(dom.name)


def every_channel(tmp: Path, repo: GitRepo, key: Path, host_config: Path, broken: bool) -> dict[str, str]:
    # test:///default keeps its domains while a connection is open: this one, throughout
    with Hypervisor(URI) as hv:
        return channels_of(hv, tmp, repo, key, host_config, broken)


def channels_of(
    hv: Hypervisor, tmp: Path, repo: GitRepo, key: Path, host_config: Path, broken: bool
) -> dict[str, str]:
    channels: dict[str, str] = {}
    r, hc = str(repo.path), str(host_config)
    with environment(SOPS_AGE_KEY_FILE=str(key), SOPS_AGE_KEY=None, XDG_CONFIG_HOME=str(tmp), GNUPGHOME=None):
        run(channels, "build", "build", "--root", r, r)
        run(channels, "build --ref", "build", "--ref", "HEAD", "--root", r, r)
        run(channels, "expand", "expand", "--repo", r)
        run(channels, "expand json", "expand", "--repo", r, "-o", "json")
        run(channels, "render", "render", "--repo", r, "--host-config", hc)
        run(channels, "validate", "validate", "--repo", r, "--host-config", hc)
        run(channels, "validate json", "validate", "--repo", r, "--host-config", hc, "-o", "json")
        for fmt in ("text", "markdown", "json"):
            run(
                channels,
                f"diff {fmt}",
                "diff",
                "--repo",
                r,
                "--base",
                "HEAD~1",
                "--host-config",
                hc,
                "-o",
                fmt,
            )
        run(channels, "diff -v", "diff", "--repo", r, "--base", "HEAD~1", "--host-config", hc, "-v")
        host_args = [
            "--repo",
            r,
            "--connect",
            URI,
            "--host-config",
            hc,
            "--log-format",
            "json",
            "--log-level",
            "debug",
        ]
        saved = tmp / "plan.json"
        run(channels, "plan", "plan", *host_args)
        run(channels, "plan json", "plan", *host_args, "-o", "json")
        run(channels, "plan --out", "plan", *host_args, "--out", str(saved))
        channels["saved plan"] = saved.read_text() if saved.exists() else ""
        applied = run(channels, "apply", "apply", *host_args, "--yes")
        assert broken or applied == 0, channels["apply stderr"] + channels["apply stdout"]
        run(channels, "status", "status", "--connect", URI, "--state-dir", str(tmp / "none"))
        run(
            channels,
            "status json",
            "status",
            "--connect",
            URI,
            "--state-dir",
            str(tmp / "none"),
            "-o",
            "json",
        )
    with environment(SOPS_AGE_KEY_FILE=None, SOPS_AGE_KEY=None, XDG_CONFIG_HOME=str(tmp), GNUPGHOME=None):
        run(channels, "validate sealed", "validate", "--repo", r, "--host-config", hc)
        run(
            channels,
            "diff sealed",
            "diff",
            "--repo",
            r,
            "--base",
            "HEAD~1",
            "--host-config",
            hc,
            "-o",
            "json",
        )
        run(channels, "build sealed", "build", "--show-secrets", "--root", r, r)
        run(channels, "plan without a key", "plan", *host_args)
    for dom in hv.list_domains():
        if dom.name.startswith(PREFIX):
            channels[f"domain {dom.name}"] = dom.persistent_xml + hv.running_xml(dom.name)
    channels.update(daemon_channels(tmp, repo, key, host_config, broken))
    for dom in hv.list_domains():
        if dom.name.startswith(PREFIX):
            channels[f"domain {dom.name} after the daemon"] = dom.persistent_xml + hv.running_xml(dom.name)
    return channels


def daemon_channels(tmp: Path, repo: GitRepo, key: Path, host_config: Path, broken: bool) -> dict[str, str]:
    """The daemon in this process on the same revision: what it logs, writes and serves."""
    config = tmp / "config.yaml"
    (tmp / "token").write_text("forge-token\n")
    # Every destination of notifications, on a port nothing answers: what they would be
    # sent is read from the queue (the sending thread is not started in this process).
    sink = "http://127.0.0.1:9"
    config.write_text(
        f"source: {{repo: {repo.path}}}\nconnect: {URI}\nhostFile: {host_config}\n"
        f"decryption: {{ageKeyFile: {key}}}\nlisten: 127.0.0.1:0\n"
        "notify:\n"
        f"  commitStatus: {{provider: gitea, baseURL: {sink}/api/v1, repository: o/r, tokenFile: {tmp / 'token'}}}\n"
        f"  webhooks: [{{url: {sink}/hook}}]\n  slack: [{{url: {sink}/slack}}]\n  alertmanager: [{{url: {sink}/am}}]\n"
    )
    state = tmp / "state"
    log = io.StringIO()
    with contextlib.redirect_stderr(log):
        setup_logging("json", "debug")
        d = Daemon(
            load_config(str(config), Overrides(state_dir=str(state))),
            notifier=Notifier({}),
            clock=FakeClock(),
        )
        try:
            d.step({RESYNC})
            assert broken or d.reason == "Succeeded", d.message
            served = http_bodies(d, ("/healthz", "/livez", "/metrics", "/", "/api/status"))
            queued = [r.body.decode() + r.what + r.url for r in d.publish.outbox.waiting()]
        finally:
            for h in d.hosts:
                h.close()
        structlog.reset_defaults()
    channels = {f"daemon GET {p}": body for p, body in served.items()}
    channels["notifications"] = "\n".join(queued)  # commit status, webhook, Slack, Alertmanager
    channels["daemon log"] = log.getvalue()
    channels["daemon message"] = d.message
    channels["daemon metrics"] = d.metrics.render().decode()
    channels["state.json"] = (state / "state.json").read_text() if (state / "state.json").exists() else ""
    run(channels, "status --state-dir", "status", "--connect", URI, "--state-dir", str(state), "-o", "json")
    return channels


@pytest.fixture(scope="module")
def key_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="leak-keys-") as tmp:
        yield Path(tmp)


@pytest.mark.parametrize("breakage", BREAKAGES)
@settings(
    max_examples=2,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # a leak is reported as found: shrinking reruns everything
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(base=VALUES, head=VALUES)
def test_no_secret_value_reaches_any_channel(
    key_dir: Path, breakage: str, base: dict[str, str], head: dict[str, str]
) -> None:
    key = age_key(key_dir, f"{breakage}.key")
    with tempfile.TemporaryDirectory(prefix="leak-") as name:
        tmp = Path(name)
        repo = GitRepo(tmp / "repo")
        secrets = tmp / "secrets"
        host_config = tmp / "host.yaml"
        host_config.write_text(f"secretsDirectory: {secrets}\n")
        write_revision(repo, base, key.recipient, "none")
        (secrets / "default" / "hostsecret").mkdir(parents=True, exist_ok=True)
        (secrets / "default" / "hostsecret" / "key").write_text(base["host"])
        write_revision(repo, head, key.recipient, breakage)
        (secrets / "default" / "hostsecret" / "key").write_text(head["host"])
        try:
            channels = every_channel(tmp, repo, key.path, host_config, broken=breakage != "none")
        finally:
            drop_domains()
    for channel in (
        "daemon GET /api/status",
        "daemon GET /metrics",
        "state.json",
        "daemon log",
        "diff json stdout",
        "notifications",
    ):
        assert channels[channel], channel  # each channel was read
    if breakage == "none":  # the working revision reached the host, the status page and the plans
        assert f"{PREFIX}web" in channels[f"domain {PREFIX}web"]
        assert f"{PREFIX}web" in channels["daemon GET /api/status"]
        assert "secret default/db-creds" in channels["plan stdout"] + channels["diff text stdout"]
    shown = {k: v for k, v in channels.items() if k.startswith("build sealed")}
    scanned = {k: v for k, v in channels.items() if not k.startswith("build sealed")}
    found = leaks(scanned, forbidden(base) | forbidden(head))
    assert not found, "\n".join(found[:20])
    # --show-secrets without the key: the plain Secrets' values, the encrypted ones' stand-ins
    encrypted = {s: v[s] for v in (base, head) for s in ("sops", "sopsFile")}
    assert not leaks(shown, forbidden(encrypted))


def test_the_scan_finds_values_where_they_are_printed(
    key_dir: Path, git_repo: GitRepo, tmp_path: Path
) -> None:
    """``build --show-secrets`` prints every build value: the scan must find each of them."""
    key = age_key(key_dir, "shown.key")
    values = {s: f"{s}Zq8Xv3Kp9Lm2Wn7Rt4Yh" for s in SOURCES}
    write_revision(git_repo, values, key.recipient, "none")
    channels: dict[str, str] = {}
    with environment(SOPS_AGE_KEY_FILE=str(key.path), SOPS_AGE_KEY=None, XDG_CONFIG_HOME=str(tmp_path)):
        assert (
            run(
                channels, "build", "build", "--show-secrets", "--root", str(git_repo.path), str(git_repo.path)
            )
            == 0
        )
    for source in SOURCES:
        if source == "host":  # a host directory's values never enter the build
            continue
        assert leaks(channels, forbidden({source: values[source]})), source
    assert "sops:" not in channels["build stdout"]  # the metadata stripped
