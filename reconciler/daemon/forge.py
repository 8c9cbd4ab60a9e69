"""Commit statuses on the forge: one context per host, for the commit it attempted.

Input: the commit-status settings (``config.notify.CommitStatusConfig``), a commit, a
host and its outcome. Output: the ``outbox.Request`` the forge's API takes. Pure.

- GitHub: ``POST {api}/repos/{owner}/{repo}/statuses/{sha}`` (``repos/create-commit-status``),
  ``state`` pending | success | failure | error, ``context``; a bearer token.
- GitLab: ``POST {api}/projects/{id}/statuses/{sha}`` (``postApiV4ProjectsIdStatusesSha``),
  ``state`` pending | running | success | failed | canceled | skipped, ``name``;
  ``PRIVATE-TOKEN``.
- Gitea and Forgejo: ``POST {api}/repos/{owner}/{repo}/statuses/{sha}``
  (``repoCreateStatus``), ``state`` pending | success | error | failure | warning,
  ``context``; ``Authorization: token``.

The description says the reason and the first error (``host1: BuildFailed:
vms/web.yaml:12:5: ...``), cut to 140 characters (GitHub's limit); the request's key is
the (commit, context) pair, so a newer state of the same context replaces one not yet sent,
and its group the context, so a newer commit's status drops an older commit's still waiting.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from reconciler.config.notify import gitlab_project
from reconciler.daemon.outbox import Request
from reconciler.wording import events as event_words
from reconciler.wording.escape import printable

if TYPE_CHECKING:
    from reconciler.config.notify import CommitStatusConfig

DESCRIPTION_MAX = 140
PENDING, SUCCESS, FAILURE = "pending", "success", "failure"
_STATES = MappingProxyType(
    {
        "github": MappingProxyType({PENDING: "pending", SUCCESS: "success", FAILURE: "failure"}),
        "gitlab": MappingProxyType({PENDING: "pending", SUCCESS: "success", FAILURE: "failed"}),
        "gitea": MappingProxyType({PENDING: "pending", SUCCESS: "success", FAILURE: "failure"}),
        "forgejo": MappingProxyType({PENDING: "pending", SUCCESS: "success", FAILURE: "failure"}),
    }
)


def description(host: str, reason: str, first_error: str) -> str:
    """``host1: applied`` / ``host1: BuildFailed: vms/web.yaml:12:5: ...`` (the first error
    only: ``ReconcileStatus.first_error``, or a health's words)."""
    text = printable(event_words.commit_status(host, reason, first_error))
    return text if len(text) <= DESCRIPTION_MAX else text[: DESCRIPTION_MAX - 1] + "…"


def status_request(cs: CommitStatusConfig, sha: str, host: str, state: str, text: str) -> Request:
    """The request that sets ``host``'s status of commit ``sha`` to ``state`` (pending,
    success or failure, worded per forge)."""
    context = cs.context_for(host)
    forge_state = _STATES[cs.provider][state]
    if cs.provider == "gitlab":
        url = f"{cs.base_url}/projects/{gitlab_project(cs.repository)}/statuses/{sha}"
        body: dict[str, str] = {"state": forge_state, "name": context, "description": text}
        headers = {"PRIVATE-TOKEN": cs.token}
    else:
        owner, _, name = cs.repository.partition("/")
        url = f"{cs.base_url}/repos/{quote(owner, safe='')}/{quote(name, safe='')}/statuses/{sha}"
        body = {"state": forge_state, "context": context, "description": text}
        if cs.provider == "github":
            headers = {
                "Authorization": f"Bearer {cs.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
            }
        else:
            headers = {"Authorization": f"token {cs.token}"}
    if cs.target_url:
        body["target_url"] = cs.target_url
    return Request(
        "POST",
        url,
        json.dumps(body, sort_keys=True).encode(),
        {**headers, "Content-Type": "application/json", "User-Agent": "reconciler"},
        label=f"{cs.provider} {urlsplit(cs.base_url).hostname}",
        what=f"status {context} {forge_state} {sha[:12]}",
        key=f"status {sha} {context}",
        group=f"status {context}",  # a newer commit's status of the context supersedes a waiting one
    )
