"""The exception tree.

Input: nothing. Output: exception classes. Every error carries ``transient``: the
daemon retries transient errors with backoff; a permanent one waits for a new
revision. Messages go ``subject: what failed: cause``; bad input names file and
line as ``path:line:col: message``. User data and secrets never go into a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.wording.escape import printable

if TYPE_CHECKING:
    from collections.abc import Sequence


class ReconcilerError(Exception):
    """Root of every error the project raises on purpose."""

    transient: bool = False


class SourceError(ReconcilerError):
    """git fetch or read failed."""

    transient = True


class SignatureError(SourceError):
    """A commit did not verify against the allowed keys."""

    transient = False


class ManifestError(ReconcilerError):
    """YAML, schema or reference problem in the repository.

    ``path`` is relative to the repository root; ``line``/``column`` are 1-based
    (0 = unknown). ``str(err)`` is ``path:line:col: message``.
    """

    def __init__(
        self,
        message: str,
        path: str | None = None,
        line: int = 0,
        column: int = 0,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.field = field
        super().__init__(self.__str__())

    def location(self) -> str:
        """``path:line:col``; the path's control characters escaped (a file name is input too)."""
        if not self.path:
            return ""
        path = printable(self.path)
        if self.line and self.column:
            return f"{path}:{self.line}:{self.column}"
        if self.line:
            return f"{path}:{self.line}"
        return path

    def __str__(self) -> str:
        loc = self.location()
        message = printable(self.message)  # names and paths from the commit: no terminal escapes
        return f"{loc}: {message}" if loc else message


class OverlayError(ManifestError):
    """Missing base or patch target; path escapes the root; unsupported feature."""


class ExpansionError(ManifestError):
    """A VM could not be expanded (missing instancetype, failed requirement, ...)."""


class ExpansionConflict(ExpansionError):
    """VM fields conflict with the selected instancetype."""

    def __init__(
        self,
        fields: Sequence[str],
        path: str | None = None,
        line: int = 0,
        column: int = 0,
        subject: str = "",
    ) -> None:
        self.fields = tuple(fields)
        self.subject = subject
        super().__init__(
            f"{subject + ': ' if subject else ''}"
            f"VM field(s) {', '.join(self.fields)} conflicts with selected instance type",
            path=path,
            line=line,
            column=column,
            field=self.fields[0] if self.fields else None,
        )


class ConfigError(ManifestError):
    """The daemon or host configuration file is invalid."""


class RenderError(ReconcilerError):
    """Unsupported field or invalid value while rendering one VM."""

    def __init__(self, subject: str, message: str, field: str | None = None) -> None:
        self.subject = subject
        self.field = field
        self.message = message
        super().__init__(printable(f"{subject}: {field + ': ' if field else ''}{message}"))


class HypervisorError(ReconcilerError):
    """A libvirtError translated in hypervisor.py."""

    def __init__(self, message: str, code: int = 0, subject: str | None = None) -> None:
        self.code = code
        self.subject = subject
        super().__init__(f"{subject}: {message}" if subject else message)


class DomainNotFound(HypervisorError):
    pass


class HypervisorUnavailable(HypervisorError):
    transient = True
