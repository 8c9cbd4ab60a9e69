"""The ``notify:`` section of the daemon configuration: where results are reported.

Input: the parsed ``notify`` mapping (through the daemon config's reader, so errors name
file:line:col) and the source repository URL. Output: a frozen ``NotifyConfig``: the
forge's commit-status API (provider, API root, repository, token, context), the
notification destinations (generic webhooks, Slack-compatible webhooks, Alertmanager)
and the rate limits. Reads the token, secret and URL files it names; never touches the
network. Secrets (tokens, HMAC secrets, Slack URLs, which are secrets themselves) are
kept out of every ``repr`` and message: a destination is named by ``label`` only.

Layout::

    notify:
      commitStatus:                 # provider and repository inferred from source.repo
        provider: github            # github | gitlab | gitea | forgejo
        baseURL: https://api.github.com
        repository: infra/vms
        tokenFile: /etc/reconciler/forge.token
        context: reconciler/{host}
        targetURL: https://reconciler.example.com/
      webhooks: [{url: https://hooks.example.com/x, secretFile: ..., events: [failed]}]
      slack: [{urlFile: /etc/reconciler/slack.url}]
      alertmanager: [{url: http://alertmanager:9093}]
      dedupe: 1h                    # the same cause is sent once per window
      rateLimit: 20                 # at most this many events per minute per destination
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from reconciler.manifests.config import read_existing_config_file
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Mapping

PROVIDERS = ("github", "gitlab", "gitea", "forgejo")
EVENT_KINDS = (
    "applied",
    "failed",
    "drift",
    "prune-refused",
    "rollback",
    "crash-loop",
    "crash-restart",
    "host-unreachable",
    "host-reachable",
    "not-ready",
    "liveness-failed",
    "rollout-halted",
)
DEFAULT_CONTEXT = "reconciler/{host}"
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>.+)$")


@dataclass(frozen=True, slots=True)
class CommitStatusConfig:
    provider: str  # github | gitlab | gitea | forgejo
    base_url: str  # the API root, without a trailing slash
    repository: str  # owner/name (GitLab: the project's full path)
    token: str = field(default="", repr=False)
    context: str = DEFAULT_CONTEXT  # "{host}" becomes the host's name
    target_url: str = ""  # the link a status carries (the status page, say)

    def context_for(self, host: str) -> str:
        return self.context.replace("{host}", host)


@dataclass(frozen=True, slots=True)
class Sink:
    """One notification destination."""

    kind: str  # webhook | slack | alertmanager
    url: str = field(repr=False)
    label: str  # safe to log: the kind, its index and the URL's host
    secret: bytes = field(default=b"", repr=False)  # generic webhooks: HMAC SHA-256 key
    events: frozenset[str] = frozenset()  # empty: every kind


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    commit_status: CommitStatusConfig | None = None
    sinks: tuple[Sink, ...] = ()
    dedupe_s: float = 3600.0
    rate_per_minute: int = 20

    @property
    def active(self) -> bool:
        return self.commit_status is not None or bool(self.sinks)


def remote_parts(repo: str) -> tuple[str, str] | None:
    """(host, repository path without ``.git``) of a remote URL, None for a local path."""
    if "://" in repo:
        parts = urlsplit(repo)
        if parts.scheme == "file" or not parts.hostname:
            return None
        host, path = parts.hostname, parts.path
    else:
        m = _SCP.match(repo)
        if m is None or repo.startswith(("/", ".")):
            return None
        host, path = m["host"], m["path"]
    path = path.strip("/").removesuffix(".git").strip("/")
    return (host.lower(), path) if path else None


def infer_provider(host: str) -> str:
    """The forge a host name says, "" when it says none."""
    if host == "github.com" or host.startswith("github."):
        return "github"
    if host == "codeberg.org" or "forgejo" in host:
        return "forgejo"
    if "gitlab" in host:
        return "gitlab"
    if "gitea" in host:
        return "gitea"
    return ""


def api_root(provider: str, host: str) -> str:
    if provider == "github":
        return "https://api.github.com" if host == "github.com" else f"https://{host}/api/v3"
    if provider == "gitlab":
        return f"https://{host}/api/v4"
    return f"https://{host}/api/v1"


def commit_url_template(provider: str, host: str, repository: str) -> str:
    """Where a person reads a commit on the forge's web pages ("{sha}" to fill in)."""
    middle = "/-/commit/" if provider == "gitlab" else "/commit/"
    return f"https://{host}/{repository}{middle}{{sha}}"


def _http_url(r: Any, node: Mapping[str, Any], key: str, where: str, strip: bool = False) -> str | None:
    v = r.nonempty(node, key, where)
    if v is None:
        return None
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise r.fail(f"{where}.{key}: expected an http:// or https:// URL", node, key)
    return str(v).rstrip("/") if strip else str(v)


def _secret_file(r: Any, node: Mapping[str, Any], key: str, where: str) -> str | None:
    path = r.file(node, key, where)
    if path is None:
        return None
    text = read_existing_config_file(path).decode(errors="replace").strip()
    if not text:
        raise r.fail(f"{where}.{key}: {path} is empty", node, key)
    return str(text)


def _commit_status(r: Any, node: Any, repo: str) -> CommitStatusConfig:
    where = "notify.commitStatus"
    c = r.section(
        node,
        "commitStatus",
        where,
        ("provider", "baseURL", "repository", "tokenFile", "context", "targetURL"),
    )
    remote = remote_parts(repo)
    provider = r.string(c, "provider", where, PROVIDERS) or (infer_provider(remote[0]) if remote else "")
    if not provider:
        raise r.fail(
            f"{where}.provider: cannot tell the forge from {'the repository URL' if remote else 'a local repository'}:"
            f" set provider ({' | '.join(PROVIDERS)})",
            node,
            "commitStatus",
            at_key=True,
        )
    base = _http_url(r, c, "baseURL", where, strip=True)
    if base is None:
        if remote is None:
            raise r.fail(
                f"{where}.baseURL: required with a local repository (the forge's API root)",
                node,
                "commitStatus",
                at_key=True,
            )
        base = api_root(provider, remote[0])
    repository = r.nonempty(c, "repository", where) or (remote[1] if remote else "")
    if not repository or "/" not in repository.strip("/"):
        raise r.fail(
            f"{where}.repository: required as OWNER/NAME (it cannot be read from the source URL)",
            node,
            "commitStatus",
            at_key=True,
        )
    token = _secret_file(r, c, "tokenFile", where)
    if token is None:
        raise r.fail(
            f"{where}.tokenFile: required (a file holding the forge's access token)",
            node,
            "commitStatus",
            at_key=True,
        )
    if any(ch.isspace() for ch in token):
        raise r.fail(f"{where}.tokenFile: the token holds whitespace (one token on one line)", c, "tokenFile")
    context = r.nonempty(c, "context", where) or DEFAULT_CONTEXT
    if "{host}" not in context:
        context = f"{context.rstrip('/')}/{{host}}"
    return CommitStatusConfig(
        provider,
        base,
        repository.strip("/"),
        token,
        context,
        _http_url(r, c, "targetURL", where) or "",
    )


def _events(r: Any, node: Mapping[str, Any], where: str) -> frozenset[str]:
    if "events" not in node:
        return frozenset()
    items = node["events"]
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise r.fail(f"{where}.events: expected a list of event kinds", node, "events")
    for i, kind in enumerate(items):
        if kind not in EVENT_KINDS:
            raise r.fail(f"{where}.events: unknown kind {kind!r} (known: {', '.join(EVENT_KINDS)})", items, i)
    return frozenset(items)


def _sinks(r: Any, node: Any, key: str, kind: str) -> list[Sink]:
    items = node[key]
    if not isinstance(items, list):
        raise r.fail(f"notify.{key}: expected a list", node, key)
    out = []
    allowed = {"webhooks": ("url", "secretFile", "events"), "slack": ("url", "urlFile", "events"),
               "alertmanager": ("url", "events")}[key]  # fmt: skip
    for i, _ in enumerate(items):
        where = f"notify.{key}[{i}]"
        m = r.section(items, i, where, allowed)
        url = _secret_file(r, m, "urlFile", where) if "urlFile" in m else _http_url(r, m, "url", where)
        if url is None:
            raise r.fail(f"{where}: url{'File' if key == 'slack' else ''} is required", items, i)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise r.fail(f"{where}.urlFile: the file does not hold an http(s) URL", m, "urlFile")
        secret = _secret_file(r, m, "secretFile", where) if "secretFile" in m else None
        out.append(
            Sink(kind, url.rstrip("/") if kind == "alertmanager" else url, f"{kind}[{i}] {parts.hostname}",
                 (secret or "").encode(), _events(r, m, where))
        )  # fmt: skip
    return out


def parse_notify(r: Any, top: Mapping[str, Any], repo: str) -> NotifyConfig:
    """``top['notify']`` read with the daemon config's reader ``r``; ``repo`` is source.repo."""
    n = r.section(
        top, "notify", "notify", ("commitStatus", "webhooks", "slack", "alertmanager", "dedupe", "rateLimit")
    )
    kw: dict[str, Any] = {}
    if "commitStatus" in n:
        kw["commit_status"] = _commit_status(r, n, repo)
    sinks: list[Sink] = []
    for key, kind in (("webhooks", "webhook"), ("slack", "slack"), ("alertmanager", "alertmanager")):
        if key in n:
            sinks += _sinks(r, n, key, kind)
    kw["sinks"] = tuple(sinks)
    if (d := r.duration(n, "dedupe", "notify")) is not None:
        kw["dedupe_s"] = d
    if "rateLimit" in n:
        v = n["rateLimit"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise r.fail(
                f"notify.rateLimit: {v!r} is not a positive integer (events per minute)", n, "rateLimit"
            )
        kw["rate_per_minute"] = v
    return NotifyConfig(**kw)


def commit_url(repo: str, cs: CommitStatusConfig | None) -> str:
    """The forge's web address of a commit ("{sha}"), "" when neither the URL nor the
    commit-status settings say which forge it is."""
    remote = remote_parts(repo)
    if remote is None:
        return ""
    provider = cs.provider if cs is not None else infer_provider(remote[0])
    return commit_url_template(provider, remote[0], remote[1]) if provider else ""


def gitlab_project(repository: str) -> str:
    """GitLab's ``:id``: the project's path, URL-encoded (``group%2Fsub%2Fproject``)."""
    return quote(repository, safe="")
