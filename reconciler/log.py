"""structlog set-up: human-readable on a terminal, JSON lines otherwise (journald).
Every string value passes ``wording.escape.log_text`` first (``clean_values``): text from
a commit or a remote prints no control character and no URL's credentials.

Input: the wanted format ("auto", "console", "json") and level. Output: configured
structlog; for the daemon (``capture_stray_output``), uncaught errors of any thread and
warnings turned into log lines too. Log keys are snake_case and stable: subject, revision, action, reason,
duration_ms.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from types import MappingProxyType

import structlog

from reconciler.wording.escape import log_text, without_credentials

MULTILINE = ("exception", "stack")  # keys whose value is a traceback, kept on its lines
# syslog priorities (journald's PRIORITY) of structlog's level names.
PRIORITY = MappingProxyType(
    {"critical": 2, "exception": 3, "error": 3, "warning": 4, "warn": 4, "info": 6, "debug": 7}
)


def setup_logging(fmt: str = "auto", level: str = "info", color: bool = True) -> None:
    """``color`` False (``--no-color``), ``NO_COLOR`` set or stderr not a terminal: plain text."""
    lvl = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    console = sys.stderr.isatty() if fmt == "auto" else fmt == "console"
    colors = color and not os.environ.get("NO_COLOR") and sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=colors) if console else JournalJSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            clean_values,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def clean_values(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """Every string of a log line through ``wording.escape.log_text`` (one line, control
    characters escaped, no credentials in URLs); a traceback keeps its lines."""
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = without_credentials(value) if key in MULTILINE else log_text(value)
    return event


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    """A logger on the *current* ``sys.stderr``: a stream swapped after set-up (a test's
    capture, a redirected daemon) is followed instead of writing to a closed file."""
    return structlog.PrintLogger(sys.stderr)


class JournalJSONRenderer:
    """JSON lines; on a journald stream each line starts with ``<N>``, its syslog priority.

    systemd connects a service's stderr to journald, which reads a leading ``<N>`` as the
    line's PRIORITY (``SyslogLevelPrefix=``, on by default) and strips it, so
    ``journalctl -p err`` finds the errors. systemd names that stream in
    ``JOURNAL_STREAM`` (``device:inode``); anywhere else the lines are plain JSON.
    """

    def __init__(self) -> None:
        self._json = structlog.processors.JSONRenderer()

    def __call__(self, logger: object, method: str, event: structlog.typing.EventDict) -> str:
        line = str(self._json(logger, method, event))
        if not _on_journal():
            return line
        return f"<{PRIORITY.get(str(event.get('level', method)), 6)}>{line}"


def _on_journal() -> bool:
    """Whether stderr is the journald stream systemd named in ``JOURNAL_STREAM``."""
    want = os.environ.get("JOURNAL_STREAM", "")
    if not want:
        return False
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return want == f"{st.st_dev}:{st.st_ino}"


def capture_stray_output() -> None:
    """The daemon's stderr holds log lines only: an uncaught error of any thread and a
    warning become one log line each (JSON in JSON mode), never a bare traceback."""
    log = structlog.get_logger("reconciler")

    def uncaught(kind: type[BaseException], err: BaseException, tb: object) -> None:
        log.critical("uncaught error", error=f"{kind.__name__}: {err}", exc_info=(kind, err, tb))

    def in_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else ""
        log.error(
            "uncaught error in a thread",
            thread=name,
            error=f"{args.exc_type.__name__}: {args.exc_value}",
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    def warned(
        message: Warning | str, category: type[Warning], filename: str, lineno: int, *_: object
    ) -> None:
        log.warning("warning", warning=str(message), category=category.__name__, where=f"{filename}:{lineno}")

    sys.excepthook = uncaught
    threading.excepthook = in_thread
    warnings.showwarning = warned  # type: ignore[assignment]
