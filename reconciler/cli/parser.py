"""The argument parser: global flags (before or after the subcommand), usage errors
with did-you-mean, --version, the help's formatting, and each subcommand made alike.

Input: nothing (``build_parser``). Output: the ``argparse`` parser whose subcommands
``cli/repo_args.py`` (the repository commands) and ``cli/host_args.py`` (the host
commands) add, each with its handler as ``func``. Never runs a command, and imports
no stage: each handler imports what it runs when it runs.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from reconciler.cli.common import EXIT_ERROR, EXIT_OK
from reconciler.cli.host_args import add_host_commands
from reconciler.cli.images import add_images_command
from reconciler.cli.repo_args import add_repo_commands

if TYPE_CHECKING:  # heavy imports stay lazy: each command imports what it runs
    from collections.abc import Sequence

    pass


DESCRIPTION = """\
Run KubeVirt VirtualMachines on plain libvirt hosts, GitOps-style: a git repository
of VM, instancetype and preference YAML (with kustomize overlays) is built, expanded
like KubeVirt does, rendered to libvirt domain XML and converged onto each host.

  reconciler validate --path overlays/prod           check a revision (CI)
  reconciler diff --base origin/main --path overlays/prod   what a pull request changes
  reconciler plan --config /etc/reconciler/config.yaml      what the daemon would do now
  reconciler run --config /etc/reconciler/config.yaml       the daemon
"""


EXIT_CODES = "exit codes: 0 success / no change, 2 changes (plan, diff), 1 error or usage error"


LOG_LEVELS = ("debug", "info", "warning", "error")  # as the daemon config's log.level


LOG_FORMATS = ("auto", "console", "json")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs as written; every option's default shown unless its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or not action.option_strings
            or default in (None, False, "", [], argparse.SUPPRESS)
        ):
            return text
        return f"{text} (default: {default})".strip()


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors exiting 1 (2 means "changes") and "did you mean", and
    no abbreviations (``--prun`` is no ``--prune``: a flag is spelled out or refused)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        hint = _did_you_mean(self, message)
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}{hint}\n")


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    words: list[str] = []
    wrong = ""
    if message.startswith("unrecognized arguments: "):
        wrong = message.split(": ", 1)[1].split()[0].split("=")[0]
        for action in parser._actions:
            words += action.option_strings
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    words += [o for a in sub._actions for o in a.option_strings]
    elif "invalid choice: " in message:
        wrong = message.split("invalid choice: ", 1)[1].split(" ", 1)[0].strip("'")
        for action in parser._actions:
            if action.choices:
                words += [str(c) for c in action.choices]
    close = difflib.get_close_matches(wrong, sorted(set(words)), n=1) if wrong else []
    return f"; did you mean {close[0]}?" if close else ""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("libvirt-gitops-reconciler")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from reconciler.catalog.admission import KUBEVIRT_COMMIT, KUBEVIRT_VERSION

        print(f"reconciler {_version()}")
        print(f"KubeVirt {KUBEVIRT_VERSION} (commit {KUBEVIRT_COMMIT[:10]}): schema and admission rules")
        parser.exit(EXIT_OK)


def _globals(suppress: bool) -> _Parser:
    """Flags accepted before or after the subcommand."""
    g = _Parser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    g.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=default if suppress else "auto",
        help="log lines: auto (console on a terminal, JSON otherwise), console or json",
    )
    g.add_argument(
        "--log-level", choices=LOG_LEVELS, default=default if suppress else "info", help="least level logged"
    )
    g.add_argument(
        "--no-color",
        action="store_true",
        default=default if suppress else False,
        help="no ANSI colours (also when NO_COLOR is set or output is not a terminal)",
    )
    return g


class Commands:
    """The subcommands' parsers, each made alike: its help as its description, its
    examples and exit codes as its epilog, the global flags accepted after it.
    ``only``: that subcommand alone is made (the others are taken and dropped)."""

    def __init__(self, sub: argparse._SubParsersAction[_Parser], only: str | None = None) -> None:
        self._sub = sub
        self._common = _globals(suppress=True)
        self._only = only

    def add(self, name: str, text: str, examples: str, codes: str = EXIT_CODES) -> argparse.ArgumentParser:
        if self._only is not None and name != self._only:
            return _Dropped()
        return self._sub.add_parser(
            name,
            help=text,
            description=text,
            epilog=f"examples:\n{examples}\n\n{codes}",
            formatter_class=_Formatter,
            parents=[self._common],
        )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, one whose sole subcommand is ``only`` and whose usage
    errors raise ``NotParsed`` (see ``parse``)."""
    parser_class = _Parser if only is None else _Partial
    parser = parser_class(
        prog="reconciler",
        description=DESCRIPTION,
        epilog=EXIT_CODES + '\nshell completion: eval "$(register-python-argcomplete reconciler)"',
        formatter_class=_Formatter,
        parents=[_globals(suppress=False)],
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the installed version and the pinned KubeVirt's, and exit",
    )
    commands = Commands(
        parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=parser_class), only
    )
    add_repo_commands(commands)
    add_host_commands(commands)
    add_images_command(commands)
    return parser


def parse(argv: Sequence[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser and ``argv`` parsed, as ``build_parser().parse_args(argv)`` gives them.

    Start-up: made with its one subcommand first (the first word not an option, a third of
    the cost of all fourteen); when that parser refuses ``argv`` (no such command, a usage
    error) or help is asked, the whole parser parses it, and its words are the ones shown.
    A parse the one-command parser accepts is the whole parser's: the same global flags,
    the same subcommand's parser, and the other subcommands only add names to choose."""
    words = list(sys.argv[1:] if argv is None else argv)
    guess = _command_word(words)
    if guess is not None and not _HELP.intersection(words):
        partial = build_parser(only=guess)
        try:
            return partial, partial.parse_args(words)
        except NotParsed:
            pass
    parser = build_parser()
    return parser, parser.parse_args(words)


_HELP = frozenset({"-h", "--help", "--version"})
_VALUED = frozenset({"--log-format", "--log-level"})  # global flags that take the next word


def _command_word(words: list[str]) -> str | None:
    """The word argparse would read as the subcommand, if it is a plain one (else None)."""
    after_flag = False
    for word in words:
        if after_flag:
            after_flag = False
        elif word in _VALUED:
            after_flag = True
        elif not word.startswith("-"):
            return word
    return None


class NotParsed(Exception):
    """A usage error of the one-command parser: the whole parser parses again."""


class _Partial(_Parser):
    def error(self, message: str) -> NoReturn:
        raise NotParsed(message)


class _Dropped(argparse.ArgumentParser):
    """A subcommand not made: takes its arguments and keeps nothing."""

    def __init__(self) -> None:  # no parser is made
        pass

    def add_argument(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def set_defaults(self, **kwargs: Any) -> None:
        return None

    def add_subparsers(self, **kwargs: Any) -> Any:
        return self

    def add_parser(self, *args: Any, **kwargs: Any) -> _Dropped:
        return self
