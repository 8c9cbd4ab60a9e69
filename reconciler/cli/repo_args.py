"""The repository commands' arguments: build, encrypt, expand, render, validate, diff.

Input: the parser's ``Commands`` (``cli/parser.py``), as ``common.Adding``. Output: each command's
subparser (its arguments, defaults and help, its examples and exit codes) with its
handler (``cli/repo.py``, ``cli/secrets.py``) as ``func``. These commands read a
repository or a file, never a host. Never runs a command: parsing is all it does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.cli.common import add_facts_arg, add_jobs_arg, add_source_args
from reconciler.cli.repo import cmd_build, cmd_diff, cmd_expand, cmd_render, cmd_validate
from reconciler.cli.secrets import cmd_encrypt

if TYPE_CHECKING:
    from reconciler.cli.common import Adding


def add_repo_commands(commands: Adding) -> None:
    """Add build, encrypt, expand, render, validate and diff, in that order."""
    p = commands.add(
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
        help="print Secrets' values (SOPS files decrypted with SOPS_AGE_KEY_FILE: without a key, an "
        "encrypted file is an error at its line, never shown as stand-ins); masked by default",
    )
    p.set_defaults(func=cmd_build)

    p = commands.add(
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

    p = commands.add(
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

    p = commands.add(
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

    p = commands.add(
        "validate",
        "check a revision: build, expand, render; exit 1 on any error",
        "  reconciler validate --path overlays/prod\n"
        "  reconciler validate --ref origin/main --path overlays/prod --host-facts hosts/h1.json\n"
        "  reconciler validate --config /etc/reconciler/config.yaml",
        "exit codes: 0 valid, 1 error",
    )
    add_source_args(p, config=True)
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

    p = commands.add(
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
