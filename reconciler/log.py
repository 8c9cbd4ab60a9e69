"""structlog set-up: human-readable on a terminal, JSON lines otherwise (journald).

Input: the wanted format ("auto", "console", "json") and level. Output: configured
structlog. Log keys are snake_case and stable: subject, revision, action, reason,
duration_ms.
"""

from __future__ import annotations

import logging
import sys

import structlog


def setup_logging(fmt: str = "auto", level: str = "info") -> None:
    lvl = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    console = sys.stderr.isatty() if fmt == "auto" else fmt == "console"
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if console
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    """A logger on the *current* ``sys.stderr``: a stream swapped after set-up (a test's
    capture, a redirected daemon) is followed instead of writing to a closed file."""
    return structlog.PrintLogger(sys.stderr)
