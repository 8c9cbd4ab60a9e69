"""The argument parser: subcommands, global flags (before or after the subcommand),
usage errors with did-you-mean, --version, completion.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import TYPE_CHECKING, NoReturn

from reconciler.cli.adopt import cmd_import
from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    add_facts_arg,
    add_host_args,
    add_jobs_arg,
    add_source_args,
    default_uri,
)
from reconciler.cli.host import cmd_apply, cmd_host_facts, cmd_plan, cmd_run, cmd_status
from reconciler.cli.repo import cmd_build, cmd_diff, cmd_expand, cmd_render, cmd_validate
from reconciler.cli.secrets import cmd_encrypt

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
    """argparse with usage errors exiting 1 (2 means "changes") and "did you mean"."""

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


def _facts_format(value: str) -> str:
    """``host-facts -o``: a format as everywhere else; a file name points at ``--out``."""
    if value == "json":
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r} is not an output format (json); to write the facts to a file: --out {value}"
    )


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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = _globals(suppress=True)

    def command(name: str, text: str, examples: str, codes: str = EXIT_CODES) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=text,
            description=text,
            epilog=f"examples:\n{examples}\n\n{codes}",
            formatter_class=_Formatter,
            parents=[common],
        )

    p = command(
        "build",
        "overlay output, like `kustomize build DIR` (reads the work tree)",
        "  reconciler build overlays/prod\n  SOPS_AGE_KEY_FILE=key.txt reconciler build --show-secrets overlays/prod",
        "exit codes: 0 built, 1 error",
    )
    p.add_argument("dir", help="kustomization directory (or a directory of YAML files)")
    p.add_argument(
        "--ref",
        default=None,
        help="build DIR as committed at this ref of its repository (default: the work tree as it is)",
    )
    p.add_argument(
        "--root", default=None, help="read nothing outside this directory (default: the git work tree)"
    )
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="print Secrets' values (SOPS files decrypted with SOPS_AGE_KEY_FILE); masked by default",
    )
    p.set_defaults(func=cmd_build)

    p = command(
        "encrypt",
        "encrypt a file as `sops --encrypt` does (age), for hosts without sops",
        "  reconciler encrypt -i secrets/db-creds.yaml        # recipients from .sops.yaml\n"
        "  reconciler encrypt --age age1... --encrypted-regex '^(data|stringData)$' db.yaml > db.enc.yaml",
        "exit codes: 0 encrypted, 1 error",
    )
    p.add_argument("file", help="the file to encrypt (YAML, JSON, .env, anything else as binary)")
    p.add_argument(
        "--age",
        action="append",
        default=[],
        metavar="RECIPIENT",
        help="age recipient (age1...; repeatable or comma-separated); default: the .sops.yaml rule's",
    )
    p.add_argument(
        "--encrypted-regex",
        default=None,
        metavar="RE",
        help="encrypt only the values under keys matching RE (a Secret: '^(data|stringData)$')",
    )
    p.add_argument(
        "--unencrypted-regex", default=None, metavar="RE", help="leave values under matching keys clear"
    )
    p.add_argument(
        "--input-type",
        choices=("yaml", "json", "dotenv", "binary"),
        default=None,
        help="the file's format (default: by its extension, as sops reads it)",
    )
    p.add_argument("-i", "--in-place", action="store_true", help="write the encrypted file over the file")
    p.set_defaults(func=cmd_encrypt)

    p = command(
        "expand",
        "print VMs with instancetype, preference, presets and defaults applied",
        "  reconciler expand --path overlays/prod\n  reconciler expand -f vm.yaml -f catalog.yaml -o json",
        "exit codes: 0 expanded, 1 error",
    )
    add_source_args(p)
    p.add_argument(
        "-f", "--file", action="append", dest="files", default=[], help="YAML file(s) instead of a repo"
    )
    p.add_argument("--output", "-o", choices=("yaml", "json"), default="yaml", help="output format")
    p.set_defaults(func=cmd_expand)

    p = command(
        "render",
        "print the libvirt domain XML of each VM",
        "  reconciler render --path overlays/prod --host-config /etc/reconciler/host.yaml",
        "exit codes: 0 rendered, 1 error",
    )
    add_source_args(p)
    p.add_argument(
        "-f", "--file", action="append", dest="files", default=[], help="YAML file(s) instead of a repo"
    )
    p.add_argument("--host-config", default=None, help="host configuration YAML")
    add_facts_arg(p)
    p.set_defaults(func=cmd_render)

    p = command(
        "validate",
        "check a revision: build, expand, render; exit 1 on any error",
        "  reconciler validate --path overlays/prod\n"
        "  reconciler validate --ref origin/main --path overlays/prod --host-facts hosts/h1.json\n"
        "  reconciler validate --config /etc/reconciler/config.yaml",
        "exit codes: 0 valid, 1 error",
    )
    add_source_args(p)
    p.add_argument("--host-config", default=None, help="host configuration YAML")
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="the daemon's configuration: render with its host's config (--host where it has several) "
        "and warn about VMs that none of its hosts runs",
    )
    p.add_argument("--host", default=None, metavar="NAME", help="with --config: the host to render for")
    add_facts_arg(p)
    add_jobs_arg(p)
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")
    p.set_defaults(func=cmd_validate)

    p = command(
        "diff",
        "what merging HEAD into BASE does to the VMs (no host needed)",
        "  reconciler diff origin/main --path overlays/prod\n"
        "  reconciler diff --base origin/main --path overlays/prod\n"
        "  reconciler diff --base origin/main --head HEAD -o markdown > comment.md\n"
        "  reconciler diff --base origin/main --config /etc/reconciler/config.yaml --host host1",
        "exit codes: 0 no change, 2 changes, 1 error in head or a usage error",
    )
    p.add_argument(
        "--repo",
        default=None,
        help="git repository (default: current directory, or the --config file's source)",
    )
    p.add_argument(
        "refs",
        nargs="*",
        metavar="BASE [HEAD]",
        help="the refs as positional arguments, like `git diff BASE [HEAD]` (or --base/--head)",
    )
    p.add_argument("--base", default=None, help="ref the change is merged into (e.g. origin/main)")
    p.add_argument("--head", default=None, help="ref with the change (default: HEAD)")
    p.add_argument(
        "--path",
        default=None,
        help="entry directory inside the repository (default: its root, or the --config file's source)",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="the daemon's configuration: resolve the policy (rollout, instancetypeRevisions, prune, "
        "restart windows) and host config as the daemon does, and state it in the report",
    )
    p.add_argument(
        "--host",
        default=None,
        metavar="NAME",
        help="with --config: the host to speak for (needed with several)",
    )
    p.add_argument("--host-config", default=None, help="host configuration YAML to render with")
    add_facts_arg(p)
    add_jobs_arg(p)
    p.add_argument(
        "-o",
        "--output",
        "--format",
        dest="format",
        choices=("text", "markdown", "json"),
        default="text",
        help="output format",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", help="text: also the libvirt XML path behind each field"
    )
    p.set_defaults(func=cmd_diff)

    for name, func, text, examples, codes in (
        (
            "plan",
            cmd_plan,
            "what apply would do on a host, with the policy the daemon would use",
            "  reconciler plan --config /etc/reconciler/config.yaml\n"
            "  reconciler plan --connect qemu:///system --host-config host.yaml --path overlays/prod --prune\n"
            "  reconciler plan --config /etc/reconciler/config.yaml --out plan.json",
            "exit codes: 0 no change, 2 changes, 1 error or a usage error",
        ),
        (
            "apply",
            cmd_apply,
            "converge a host to a revision: the plan first, then each change, then a summary",
            "  reconciler apply --connect qemu:///system --host-config host.yaml --path overlays/prod\n"
            "  reconciler apply --config /etc/reconciler/config.yaml --prune --yes\n"
            "  reconciler apply plan.json",
            "exit codes: 0 applied, 1 error or a usage error",
        ),
    ):
        p = command(name, text, examples, codes)
        add_source_args(p, config=True)
        add_host_args(p)
        add_jobs_arg(p)
        p.add_argument("-v", "--verbose", action="store_true", help="also list unchanged domains")
        p.add_argument(
            "-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format"
        )
        if name == "plan":
            p.add_argument(
                "--out",
                "-out",
                dest="out",
                default=None,
                metavar="FILE",
                help="also save the plan to FILE: `reconciler apply FILE` applies exactly it, or nothing",
            )
        if name == "apply":
            p.add_argument(
                "plan_file",
                nargs="?",
                default=None,
                metavar="FILE",
                help="a plan saved by `plan --out FILE`: apply exactly it, or nothing if the host moved since",
            )
            p.add_argument(
                "-y",
                "--yes",
                action="store_true",
                help="apply without asking (on a terminal apply asks before any change; elsewhere "
                "a plan that deletes, restarts or stops a VM needs --yes)",
            )
        p.set_defaults(func=func)

    p = command(
        "host-facts",
        "write what a libvirt host offers as JSON (for --host-facts in CI)",
        "  reconciler host-facts --connect qemu:///system --out hosts/h1.json\n"
        "  reconciler host-facts --connect qemu:///system -o json | jq .caps.machines",
        "exit codes: 0 written, 1 error",
    )
    p.add_argument(
        "--connect", default=default_uri(), help="libvirt URI (LIBVIRT_DEFAULT_URI, else test:///default)"
    )
    p.add_argument(
        "--host-config", default=None, help="host configuration YAML (its image files are checked too)"
    )
    p.add_argument(
        "--output",
        "-o",
        type=_facts_format,
        default="json",
        help="output format: json, the format --host-facts reads (write a file with --out FILE)",
    )
    p.add_argument(
        "--out", default=None, metavar="FILE", help="write the facts to FILE instead of standard output"
    )
    p.set_defaults(func=cmd_host_facts)

    p = command(
        "import",
        "write a repository (VMs, kustomization, host config) from a host's domains or a KubeVirt "
        "export; every domain imported plans with no change",
        "  reconciler import --connect qemu:///system --output ./fleet\n"
        "  reconciler import --connect qemu:///system --match 'web-*' --output ./web\n"
        "  reconciler import --connect qemu:///system --keep-unsupported --output ./fleet\n"
        "  reconciler import --from-kubevirt export.yaml --output ./from-cluster",
        "exit codes: 0 everything imported, 2 some left out (each with its reasons), 1 error",
    )
    p.add_argument("names", nargs="*", help="domains to import (default: every domain, or --match)")
    p.add_argument("--match", default=None, help="import the domains whose names match this shell pattern")
    p.add_argument(
        "--connect", default=default_uri(), help="libvirt URI (LIBVIRT_DEFAULT_URI, else test:///default)"
    )
    p.add_argument(
        "--from-kubevirt",
        default=None,
        metavar="FILE",
        help="a `kubectl get vm,... -A -o yaml` export to import instead of a host's domains",
    )
    p.add_argument(
        "--output-dir", "--dir", required=True, help="directory to write (new or empty; never overwritten)"
    )
    p.add_argument("--host", default=None, help="host name in the host config (default: the host's name)")
    p.add_argument(
        "--keep-unsupported",
        action="store_true",
        help="keep the domain XML KubeVirt's fields cannot say (SPICE, <pm>, libosinfo metadata, ...) in "
        "each VM's reconciler.kubevirt.io/domain-xml-passthrough annotation, where its allowlist lets it "
        "(docs/passthrough.md), instead of leaving the domain out",
    )
    p.add_argument("--no-git", action="store_true", help="write the files only (no git repository)")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text", help="summary format")
    p.set_defaults(func=cmd_import)

    p = command(
        "run",
        "the daemon: watch the repository and converge the hosts",
        "  reconciler run --config /etc/reconciler/config.yaml\n"
        "  reconciler run --repo examples/repo --path overlays/dev --once",
        "exit codes: 0 stopped cleanly (--once: applied), 1 error",
    )
    p.add_argument(
        "--config", default=None, help="daemon configuration YAML (default /etc/reconciler/config.yaml)"
    )
    p.add_argument("--repo", default=None, help="local repository path or remote URL (overrides source.repo)")
    p.add_argument("--branch", default=None, help="branch to follow (overrides source.branch)")
    p.add_argument("--path", default=None, help="entry directory in the repository (overrides source.path)")
    p.add_argument("--connect", default=None, help="one libvirt URI (overrides connect/hosts)")
    p.add_argument("--host-config", default=None, help="host configuration YAML (overrides host)")
    p.add_argument("--state-dir", default=None, help="state directory (default /var/lib/reconciler)")
    p.add_argument("--listen", default=None, help="HOST:PORT for /healthz, /metrics, /hooks/git ('' = off)")
    p.add_argument(
        "--prune", action="store_true", default=None, help="undefine managed domains whose VM left git"
    )
    p.add_argument(
        "--owner",
        default=None,
        help="owner identity in the ownership marks (overrides policy.owner; default: the repository "
        "and entry path, the same from every clone)",
    )
    p.add_argument("--once", action="store_true", help="reconcile once and exit (0 applied, 1 not)")
    p.add_argument(
        "--show-plans", action="store_true", help="print every plan that changes something, and the VM table"
    )
    p.set_defaults(func=cmd_run)

    p = command(
        "status",
        "table of managed VMs per host, from libvirt and the daemon's state file",
        "  reconciler status\n  reconciler status --connect qemu:///system -o json",
        "exit codes: 0 shown, 1 state file missing or unreadable, or every host unreachable",
    )
    p.add_argument(
        "--config", default=None, help="daemon configuration (default /etc/reconciler/config.yaml if present)"
    )
    p.add_argument(
        "--connect", default=None, help="libvirt URI (default: the hosts of the config or state file)"
    )
    p.add_argument(
        "--state-dir", default=None, help="the daemon's state directory (default /var/lib/reconciler)"
    )
    p.add_argument("--all", action="store_true", help="also list unmanaged domains")
    p.add_argument(
        "--output", "-o", choices=("table", "text", "json", "yaml"), default="table", help="output format"
    )
    p.set_defaults(func=cmd_status)
    return parser
