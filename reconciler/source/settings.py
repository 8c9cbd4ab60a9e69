"""Where the daemon's revisions come from: a repository, a branch, an entry path, and
how to reach and trust it (credentials by file reference, signature verification).

Input: values read from the daemon's config file (``daemon.settings`` parses it).
Output: frozen records the git source (``source.mirror``) works from. Pure. A
repository URL may carry credentials (``https://user:TOKEN@host/r.git``): only git reads
``repo``; everything logged, stored or served names ``shown``.
"""

from __future__ import annotations

from dataclasses import field

from reconciler.model.identifiers import is_remote_url
from reconciler.records import dataclass
from reconciler.wording.escape import url


@dataclass(frozen=True, slots=True)
class Credentials:
    """How to authenticate to a remote; secrets stay in files, only paths are kept."""

    ssh_key_file: str = ""
    known_hosts_file: str = ""
    username: str = ""
    password_file: str = ""


@dataclass(frozen=True, slots=True)
class Verify:
    mode: str  # "gpg" | "ssh"
    keys: str  # armored public keys (gpg) or an allowed-signers file (ssh)


@dataclass(frozen=True, slots=True)
class SourceConfig:
    repo: str
    branch: str = ""  # "" = HEAD of a local repository, the default branch of a remote
    path: str = ""
    credentials: Credentials = field(default_factory=Credentials)
    verify: Verify | None = None

    @property
    def remote(self) -> bool:
        return is_remote_url(self.repo)

    @property
    def shown(self) -> str:
        """``repo`` as logged, stored and served: a URL without its credentials (git alone
        reads ``repo`` itself)."""
        return url(self.repo)
