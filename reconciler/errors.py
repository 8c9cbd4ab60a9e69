"""The exception tree.

Input: nothing. Output: exception classes. Every error carries ``transient``: the
daemon retries transient errors with backoff; a permanent one waits for a new
revision. Messages go ``subject: what failed: cause``; bad input names file and
line as ``path:line:col: message``. User data and secrets never go into a message.

An error that leaves its stage becomes a ``Problem`` record there (``err.problem()``):
its cause, the VM it concerns and where, as fields of their own; ``str(err)`` stays the
same line ``wording.problems`` prints for that record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model import Problem
from reconciler.wording.escape import printable, shortened

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model import VMKey


class ReconcilerError(Exception):
    """Root of every error the project raises on purpose."""

    transient: bool = False

    def problem(self) -> Problem:
        """This error as a record (the whole text as its message, unless a subclass knows more)."""
        return Problem(str(self), transient=self.transient)


class SourceError(ReconcilerError):
    """git fetch or read failed."""

    transient = True


class SignatureError(SourceError):
    """A commit did not verify against the allowed keys. ``commit``: the one that did not
    (its first 12 digits; ``""`` when the refusal names none, e.g. unreadable keys)."""

    transient = False

    def __init__(self, message: str, commit: str = "") -> None:
        super().__init__(message)
        self.commit = commit


class ManifestError(ReconcilerError):
    """YAML, schema or reference problem in the repository.

    ``path`` is relative to the repository root; ``line``/``column`` are 1-based
    (0 = unknown); ``field`` is where the line points (not shown: ``message`` says it).
    ``vm``: the VM the error is about, shown before the message. ``str(err)`` is
    ``path:line:col: [vm/<name>: ]message``.
    """

    def __init__(
        self,
        message: str,
        path: str | None = None,
        line: int = 0,
        column: int = 0,
        field: str | None = None,
        vm: VMKey | None = None,
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.field = field
        self.vm = vm
        super().__init__(self.__str__())

    def problem(self) -> Problem:
        return Problem(
            self.message,
            vm=self.vm,
            path=self.path or "",
            line=self.line if self.path else 0,
            column=self.column if self.path else 0,
            transient=self.transient,
        )

    def location(self) -> str:
        """``path:line:col``; the path's control characters escaped (a file name is input too)."""
        if not self.path:
            return ""
        path = printable(shortened(self.path))
        if self.line and self.column:
            return f"{path}:{self.line}:{self.column}"
        if self.line:
            return f"{path}:{self.line}"
        return path

    def __str__(self) -> str:
        loc = self.location()
        said = f"{self.vm.subject}: {self.message}" if self.vm is not None else self.message
        message = printable(shortened(said))  # names and paths from the commit: no escapes, bounded
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
        vm: VMKey | None = None,
    ) -> None:
        self.fields = tuple(fields)
        super().__init__(
            f"VM field(s) {', '.join(self.fields)} conflicts with selected instance type",
            path=path,
            line=line,
            column=column,
            field=self.fields[0] if self.fields else None,
            vm=vm,
        )


class ConfigError(ManifestError):
    """The daemon or host configuration file is invalid."""


class RenderError(ReconcilerError):
    """Unsupported field or invalid value while rendering one VM.

    It becomes a ``Problem`` where the VM's file is known (``render.placement.render_problem``
    finds the field's line)."""

    def __init__(self, vm: VMKey, message: str, field: str | None = None) -> None:
        self.vm = vm
        self.field = field
        self.message = message
        super().__init__(printable(shortened(f"{vm.subject}: {field + ': ' if field else ''}{message}")))

    @property
    def subject(self) -> str:
        return self.vm.subject


class HypervisorError(ReconcilerError):
    """A libvirtError translated in hypervisor.py."""

    def __init__(
        self, message: str, code: int = 0, subject: str | None = None, transient: bool | None = None
    ) -> None:
        self.message = message
        self.code = code
        self.subject = subject
        if transient is not None:  # the error of one call says it may pass (a system error)
            self.transient = transient
        super().__init__(f"{subject}: {message}" if subject else message)

    def problem_of(self, vm: VMKey) -> Problem:
        """The record of this error met while working on ``vm``: the VM as a field when the
        error names it, else what it names (``pool/images``) as its subject."""
        if self.subject == vm.subject:
            return Problem(self.message, vm=vm, transient=self.transient)
        return Problem(self.message, subject=self.subject or "", transient=self.transient)


class DomainNotFound(HypervisorError):
    pass


class HypervisorUnavailable(HypervisorError):
    transient = True
