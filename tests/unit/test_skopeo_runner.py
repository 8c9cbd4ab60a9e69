"""How skopeo is run (``reconciler.images.skopeo``), proven with a stand-in binary that
records what it was given.

Covers: credentials reach skopeo only in the ``--authfile`` file, mode 0600, removed
after the call, and never in its arguments or environment; no ambient configuration
(an empty registries.conf, a policy file, ``HOME`` inside the call's directory); the
CA bundle in ``--cert-dir`` / ``--src-cert-dir``; TLS flags as asked; skopeo's error
quoted from logrus' ``msg``, a secret it echoes replaced, its kind told apart (TLS,
plain HTTP, auth, missing, digest); a call past its deadline is a ``timeout``; a
``.dockerconfigjson`` of the wrong shape is refused without quoting it; ``PullAuth``
shows no value.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from reconciler.images.skopeo import PullAuth, Skopeo, SkopeoError, dockerconfigjson

PASSWORD = "pw-" + "7f3a9c" * 4
CONFIG = json.dumps(
    {"auths": {"r.lan": {"auth": base64.b64encode(f"u:{PASSWORD}".encode()).decode()}}}
).encode()

# A stand-in: records its arguments, environment, the auth file's mode and bytes, then
# prints what $FAKE_OUT holds and exits with $FAKE_RC.
FAKE = """#!/bin/sh
out=$(dirname "$0")
printf '%s\\n' "$@" > "$out/argv"
env > "$out/env"
prev=""
for a in "$@"; do
  if [ "$prev" = "--authfile" ]; then stat -c %a "$a" > "$out/mode"; cat "$a" > "$out/auth"; echo "$a" > "$out/path"; fi
  case "$a" in --cert-dir=*|--src-cert-dir=*) cat "${a#*=}/ca.crt" > "$out/ca";; esac
  prev="$a"
done
[ -f "$out/stderr" ] && cat "$out/stderr" >&2
[ -f "$out/sleep" ] && sleep 5
printf '{"schemaVersion": 2}'
exit $(cat "$out/rc" 2>/dev/null || echo 0)
"""


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    binary = tmp_path / "skopeo"
    binary.write_text(FAKE)
    binary.chmod(0o755)
    return tmp_path


def test_credentials_only_in_a_private_file(fake: Path) -> None:
    auth = dockerconfigjson(CONFIG, "Secret default/pull")
    out = Skopeo(binary=str(fake / "skopeo")).inspect_raw("docker://r.lan/x:1", True, auth)
    assert out == b'{"schemaVersion": 2}'
    argv = (fake / "argv").read_text().splitlines()
    env = (fake / "env").read_text()
    assert PASSWORD not in "\n".join(argv)
    assert PASSWORD not in env
    assert base64.b64encode(f"u:{PASSWORD}".encode()).decode() not in "\n".join(argv) + env
    assert (fake / "auth").read_bytes() == CONFIG
    assert (fake / "mode").read_text().strip() == "600"
    assert not Path((fake / "path").read_text().strip()).exists()  # removed after the call
    assert argv[argv.index("inspect") :] == [
        "inspect",
        "--authfile",
        (fake / "path").read_text().strip(),
        "--raw",
        "--no-tags",
        "--tls-verify=true",
        "docker://r.lan/x:1",
    ]
    assert "--policy" in argv
    assert "--command-timeout" in argv
    home = next(line for line in env.splitlines() if line.startswith("HOME="))
    conf = next(line for line in env.splitlines() if line.startswith("CONTAINERS_REGISTRIES_CONF="))
    assert Path(conf.partition("=")[2]).parent == Path(home.partition("=")[2])


def test_anonymous_pulls_use_an_empty_auth_file(fake: Path) -> None:
    Skopeo(binary=str(fake / "skopeo")).copy_to_dir(
        "docker://r.lan/x@sha256:" + "a" * 64, fake / "d", False, PullAuth()
    )
    assert json.loads((fake / "auth").read_text()) == {"auths": {}}
    argv = (fake / "argv").read_text().splitlines()
    assert "--src-tls-verify=false" in argv
    assert "--preserve-digests" in argv
    assert f"dir:{fake / 'd'}" in argv


@pytest.mark.parametrize(("call", "flag"), [("inspect", "--cert-dir="), ("copy", "--src-cert-dir=")])
def test_a_ca_bundle_is_given_as_a_cert_dir(fake: Path, call: str, flag: str) -> None:
    skopeo = Skopeo(binary=str(fake / "skopeo"))
    auth = PullAuth(ca_bundle="-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n")
    if call == "inspect":
        skopeo.inspect_raw("docker://r.lan/x:1", True, auth)
    else:
        skopeo.copy_to_dir("docker://r.lan/x@sha256:" + "a" * 64, fake / "d", True, auth)
    assert any(a.startswith(flag) for a in (fake / "argv").read_text().splitlines())
    assert (fake / "ca").read_text() == auth.ca_bundle


@pytest.mark.parametrize(
    ("stderr", "kind", "shown"),
    [
        (
            'time="2026-01-01T00:00:00Z" level=fatal msg="Error parsing image name \\"docker://r.lan/x:1\\": '
            'pinging container registry r.lan: Get \\"https://r.lan/v2/\\": x509: certificate signed by unknown authority"',
            "tls",
            'pinging container registry r.lan: Get "https://r.lan/v2/": x509: certificate signed by unknown authority',
        ),
        (
            "http: server gave HTTP response to HTTPS client",
            "http",
            "http: server gave HTTP response to HTTPS client",
        ),
        (
            f"unauthorized: authentication required for u:{PASSWORD}",
            "auth",
            "authentication required for [redacted]",
        ),
        ("reading manifest 1 in r.lan/x: manifest unknown: manifest unknown", "missing", "manifest unknown"),
        (
            "writing blob: happened during read: Digest did not match, expected sha256:1",
            "digest",
            "Digest did not match",
        ),
        ("connection reset by peer", "other", "connection reset by peer"),
    ],
    ids=["tls", "http", "auth", "missing", "digest", "other"],  # no password in a test's name
)
def test_errors_told_apart_and_cleaned(fake: Path, stderr: str, kind: str, shown: str) -> None:
    (fake / "stderr").write_text(stderr)
    (fake / "rc").write_text("1")
    auth = dockerconfigjson(CONFIG, "Secret default/pull")
    with pytest.raises(SkopeoError) as err:
        Skopeo(binary=str(fake / "skopeo")).inspect_raw("docker://r.lan/x:1", True, auth)
    assert err.value.kind == kind
    assert shown in str(err.value)
    assert PASSWORD not in str(err.value)
    assert "level=fatal" not in str(err.value)


def test_a_call_past_its_deadline(fake: Path) -> None:
    (fake / "sleep").write_text("")
    with pytest.raises(SkopeoError, match=r"no answer within 0\.5 s") as err:
        Skopeo(binary=str(fake / "skopeo"), timeout=0.5).inspect_raw("docker://r.lan/x:1", True, PullAuth())
    assert err.value.kind == "timeout"


def test_no_skopeo(tmp_path: Path) -> None:
    with pytest.raises(SkopeoError, match="is not installed") as err:
        Skopeo(binary=str(tmp_path / "none")).inspect_raw("docker://r.lan/x:1", True, PullAuth())
    assert err.value.kind == "absent"


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"{", "is not JSON"), (b"[]", 'has no "auths" mapping'), (b'{"auths": []}', 'has no "auths" mapping')],
)
def test_dockerconfigjson_shape(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=f"^Secret default/pull: .dockerconfigjson {why}"):
        dockerconfigjson(data, "Secret default/pull")


def test_pull_auth_shows_no_value() -> None:
    auth = dockerconfigjson(CONFIG, "Secret default/pull")
    assert repr(auth) == str(auth) == "PullAuth(Secret default/pull)"
    assert PASSWORD in auth.secrets()
    assert f"u:{PASSWORD}" in auth.secrets()
