# PYTHON_ARGCOMPLETE_OK
"""Command line: build / expand / render / validate / diff / plan / apply / run / status.

Input: argv. Output: text on stdout, errors on stderr, exit codes: 0 no changes (or
success), 2 changes, 1 error (a usage error too) — so CI can tell drift from
breakage. I/O shell only: every decision is made by the stages it calls.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING

import reconciler.daemon.early  # noqa: F401 - first: the daemon's signals are caught from here on
from reconciler.cli.common import EXIT_ERROR, EXIT_OK, say_error

if TYPE_CHECKING:
    from collections.abc import Sequence

# Commands that log nothing (they print): start-up without the logging library.
_QUIET = frozenset({"build", "encrypt", "expand", "render", "validate", "diff"})


def main(argv: Sequence[str] | None = None) -> int:
    collecting = gc.isenabled()
    # Start-up (the parser and the modules it imports: the records, the YAML reader, the
    # model) makes objects that stay: the cyclic collector would only walk them. A command
    # that logs turns it back on below.
    gc.disable()
    try:
        return _run(argv, collecting)
    finally:
        if collecting:
            gc.enable()


def _run(argv: Sequence[str] | None, collecting: bool) -> int:
    from reconciler.cli.parser import build_parser, parse
    from reconciler.errors import ReconcilerError

    if os.environ.get("_ARGCOMPLETE"):  # shell completion (register-python-argcomplete reconciler)
        import argcomplete

        argcomplete.autocomplete(build_parser())
    parser, args = parse(argv)
    if args.command is None:  # a bare `reconciler`: help, not an error
        parser.print_help()
        return EXIT_OK
    if args.command not in _QUIET:
        # One short run building large acyclic trees (a fleet's documents, domains): for the
        # quiet commands the cyclic collector would only rescan them, a third of the run at
        # 5000 VMs. The others (the daemon among them) collect.
        if collecting:
            gc.enable()
        from reconciler.log import setup_logging

        setup_logging(args.log_format, args.log_level, color=not args.no_color)
    try:
        code: int = args.func(args)
    except ReconcilerError as err:
        say_error(str(err))
        return EXIT_ERROR
    except BrokenPipeError:  # `reconciler status | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as err:  # a file named on the command line: its path and the reason
        from reconciler.wording.escape import os_error

        say_error(os_error(err))
        return EXIT_ERROR
    except ValueError as err:
        say_error(str(err))
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    return code
