"""``skopeo``, Debian's client of the registry protocol, run bounded and hermetic.

Input: a ``docker://`` name, whether TLS is verified for its registry, the credentials
to use (``PullAuth``) and a deadline. Output: a manifest's raw bytes
(``inspect_raw``) or an image copied into a ``dir:`` layout (``copy_to_dir``). Runs
``skopeo`` only, each call with a subprocess timeout (and skopeo's own
``--command-timeout``).

Hermetic: skopeo reads no ``registries.conf`` of the host (an empty one is given: mirrors
and insecure registries are the host config's, applied by ``registry``), no ambient
credentials (``--authfile`` always names the file of this pull, an empty one when there
are none), and a trust policy accepting what the digest check accepts (every image is
pulled by a digest checked here). Credentials reach skopeo only in a 0600 file inside a
0700 temporary directory removed after the call: never on its command line, in its
environment or in a message. Skopeo's error is quoted with credentials of URLs removed,
every known secret string replaced, and cut short.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.records import dataclass
from reconciler.wording.escape import printable, shortened, without_credentials

if TYPE_CHECKING:
    from collections.abc import Iterator

SKOPEO = "skopeo"
MAX_AUTH_FILE = 1 << 20
_POLICY = '{"default": [{"type": "insecureAcceptAnything"}]}\n'


class SkopeoError(Exception):
    """A skopeo call failed; ``kind`` says how (``auth``, ``tls``, ``http``, ``missing``,
    ``timeout``, ``digest``, ``absent``, ``config``, ``other``) and the message is safe to show."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True, repr=False)
class PullAuth:
    """Credentials of one pull: a ``dockerconfigjson`` document (from a Secret of the
    repository) or the host's auth file path, or neither. ``repr`` names no value."""

    config_json: bytes = field(default=b"", compare=False)
    auth_file: str = ""
    origin: str = ""  # what they came from, shown: "Secret ns/name", "registries.authFile"
    ca_bundle: str = ""  # PEM of CAs trusted besides the system's (a DataVolume's certConfigMap)

    def __repr__(self) -> str:
        return f"PullAuth({self.origin or 'anonymous'})"

    __str__ = __repr__

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be shown: the passwords, tokens and ``auth`` values."""
        if not self.config_json:
            return ()
        try:
            doc = json.loads(self.config_json)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return ()
        out: list[str] = []
        for entry in (doc.get("auths") or {}).values() if isinstance(doc, dict) else ():
            if isinstance(entry, dict):
                out += [v for k, v in entry.items() if k != "username" and isinstance(v, str) and len(v) >= 4]
                if isinstance(entry.get("auth"), str):  # base64 of user:password
                    try:
                        pair = base64.b64decode(entry["auth"], validate=True).decode()
                    except (ValueError, UnicodeDecodeError):
                        continue
                    out += [x for x in (pair, pair.partition(":")[2]) if len(x) >= 4]
        return tuple(sorted(set(out), key=len, reverse=True))  # the longest replaced first


def dockerconfigjson(data: bytes, origin: str) -> PullAuth:
    """Credentials from the ``.dockerconfigjson`` value of a Secret, checked for shape;
    ``ValueError`` says what is wrong without quoting it."""
    if len(data) > MAX_AUTH_FILE:
        raise ValueError(f"{origin}: .dockerconfigjson is over {MAX_AUTH_FILE} bytes")
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"{origin}: .dockerconfigjson is not JSON") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("auths"), dict):
        raise ValueError(f'{origin}: .dockerconfigjson has no "auths" mapping')
    return PullAuth(config_json=data, origin=origin)


@dataclass(frozen=True, slots=True)
class Skopeo:
    """How skopeo is run: its path and the deadlines of one call (seconds): ``timeout``
    for a manifest, ``copy_timeout`` for a whole image (as an http download's hour)."""

    binary: str = SKOPEO
    timeout: float = 120.0
    copy_timeout: float = 3600.0

    @contextmanager
    def _workspace(self, auth: PullAuth, timeout: float) -> Iterator[tuple[Path, list[str], dict[str, str]]]:
        """A private directory with the policy, an empty registries.conf, the auth file
        and the CAs (``certs/ca.crt``); the global arguments and environment that name them."""
        with tempfile.TemporaryDirectory(prefix="reconciler-skopeo-") as tmp:
            work = Path(tmp)  # mode 0700
            (work / "policy.json").write_text(_POLICY)
            (work / "registries.conf").write_text("")
            (work / "registries.d").mkdir()
            authfile = work / "auth.json"
            fd = os.open(authfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                if auth.config_json:
                    f.write(auth.config_json)
                elif auth.auth_file:
                    f.write(_read_auth_file(auth.auth_file))
                else:
                    f.write(b'{"auths": {}}\n')
            if auth.ca_bundle:
                (work / "certs").mkdir()
                (work / "certs" / "ca.crt").write_text(auth.ca_bundle)
            args = [
                "--policy",
                str(work / "policy.json"),
                "--registries.d",
                str(work / "registries.d"),
                "--command-timeout",
                f"{max(1, int(timeout))}s",
            ]
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(work),
                "TMPDIR": str(work),
                "CONTAINERS_REGISTRIES_CONF": str(work / "registries.conf"),
                "REGISTRY_AUTH_FILE": str(authfile),
            }
            yield authfile, args, env

    def _run(self, sub: list[str], auth: PullAuth, name: str, cert_flag: str, timeout: float) -> bytes:
        with self._workspace(auth, timeout) as (authfile, glob, env):
            certs = [f"{cert_flag}={authfile.parent / 'certs'}"] if auth.ca_bundle else []
            cmd = [self.binary, *glob, *sub[:1], "--authfile", str(authfile), *certs, *sub[1:]]
            try:
                proc = subprocess.run(
                    cmd,
                    capture_output=True,
                    env=env,
                    timeout=timeout,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
            except FileNotFoundError as err:
                raise SkopeoError(
                    f"{self.binary} is not installed (Debian package skopeo)", "absent"
                ) from err
            except subprocess.TimeoutExpired as err:
                raise SkopeoError(f"no answer within {timeout:g} s", "timeout") from err
        if proc.returncode != 0:
            raise _failure(proc.stderr.decode("utf-8", "replace"), name, auth)
        return proc.stdout

    def inspect_raw(self, name: str, tls_verify: bool, auth: PullAuth) -> bytes:
        """The raw manifest ``name`` (``docker://...``) names, as the registry serves it."""
        return self._run(
            ["inspect", "--raw", "--no-tags", f"--tls-verify={_flag(tls_verify)}", name],
            auth,
            name,
            "--cert-dir",
            self.timeout,
        )

    def copy_to_dir(self, name: str, dest: Path, tls_verify: bool, auth: PullAuth) -> None:
        """The image ``name`` (by digest) copied as it is into ``dest`` (``dir:`` layout)."""
        self._run(
            [
                "copy",
                "--quiet",
                "--preserve-digests",
                f"--src-tls-verify={_flag(tls_verify)}",
                name,
                f"dir:{dest}",
            ],
            auth,
            name,
            "--src-cert-dir",
            self.copy_timeout,
        )


def _flag(on: bool) -> str:
    return "true" if on else "false"


def _read_auth_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:  # noqa: PTH123  (opened once, bounded)
            data = f.read(MAX_AUTH_FILE + 1)
    except OSError as err:
        raise SkopeoError(
            f"registries.authFile {path}: cannot read it ({err.strerror or err})", "config"
        ) from err
    if len(data) > MAX_AUTH_FILE:
        raise SkopeoError(f"registries.authFile {path}: over {MAX_AUTH_FILE} bytes", "config")
    return data


# What skopeo's (containers/image's) errors say, in the order they are told apart.
_KINDS = (
    ("digest", ("digest did not match",)),
    ("http", ("server gave http response to https client",)),
    ("tls", ("x509:", "tls:", "certificate")),
    ("auth", ("unauthorized", "authentication required", "denied", "invalid username/password")),
    ("missing", ("manifest unknown", "name unknown", "not found", "404")),
)


def _failure(stderr: str, name: str, auth: PullAuth) -> SkopeoError:
    text = " ".join(stderr.split())
    if 'msg="' in text:  # logrus: time="..." level=fatal msg="..."
        text = text.split('msg="', 1)[1].rsplit('"', 1)[0].replace('\\"', '"')
    if text.startswith('Error parsing image name "') and '": ' in text:
        text = text.split('": ', 1)[1]  # it repeats the name the message already gives
    for secret in auth.secrets():
        text = text.replace(secret, "[redacted]")
    text = printable(shortened(without_credentials(text.strip())))[:400]
    low = text.lower()
    kind = next((k for k, marks in _KINDS if any(m in low for m in marks)), "other")
    return SkopeoError(text or f"skopeo failed on {name}", kind)


__all__: list[str] = ["PullAuth", "Skopeo", "SkopeoError", "dockerconfigjson"]
