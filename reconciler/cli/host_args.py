"""The host commands' arguments: plan, apply, show, host-facts, import, run, status.

Input: the parser's ``Commands`` (``cli/parser.py``), as ``common.Adding``. Output: each command's
subparser (its arguments, defaults and help, its examples and exit codes) with its
handler (``cli/host.py``, ``cli/saved_plan.py``, ``cli/adopt.py``) as ``func``. These commands read a
libvirt host or the daemon's configuration. Never runs a command: parsing is all it
does (the default URI is read from the environment, as libvirt reads it).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from reconciler.cli.adopt import cmd_import
from reconciler.cli.common import add_host_args, add_jobs_arg, add_source_args, default_uri
from reconciler.cli.host import cmd_apply, cmd_host_facts, cmd_plan, cmd_run, cmd_status
from reconciler.cli.saved_plan import cmd_show
from reconciler.model.units import parse_duration

if TYPE_CHECKING:
    from reconciler.cli.common import Adding


def facts_format(value: str) -> str:
    """``host-facts -o``: a format as everywhere else; a file name points at ``--out``."""
    if value == "json":
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r} is not an output format (json); to write the facts to a file: --out {value}"
    )


def add_host_commands(commands: Adding) -> None:
    """Add plan, apply, show, host-facts, import, run and status, in that order."""
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
            "  reconciler apply plan.json --repo . --host-config host.yaml",
            "exit codes: 0 applied, 1 error or a usage error",
        ),
    ):
        p = commands.add(name, text, examples, codes)
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
                help="a plan saved by `plan --out FILE`: verified against the repository (--repo) at its "
                "commit and this host's own configuration (--config, or --host-config and --owner), then "
                "applied exactly, or nothing if anything differs or the host moved since",
            )
            p.add_argument(
                "-y",
                "--yes",
                action="store_true",
                help="apply without asking (on a terminal apply asks before any change; elsewhere "
                "a plan that deletes, restarts, stops or adopts a VM needs --yes)",
            )
        p.set_defaults(func=func)

    p = commands.add(
        "show",
        "print a plan saved by `plan --out FILE` as plan printed it (no host or repository is read)",
        "  reconciler show plan.json\n  reconciler show plan.json -o json",
        "exit codes: 0 no change, 2 changes, 1 not a saved plan",
    )
    p.add_argument("plan_file", metavar="FILE", help="a plan saved by `plan --out FILE`")
    p.add_argument("-v", "--verbose", action="store_true", help="also list unchanged domains")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")
    p.set_defaults(func=cmd_show)

    p = commands.add(
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
        type=facts_format,
        default="json",
        help="output format: json, the format --host-facts reads (write a file with --out FILE)",
    )
    p.add_argument(
        "--out", default=None, metavar="FILE", help="write the facts to FILE instead of standard output"
    )
    p.set_defaults(func=cmd_host_facts)

    p = commands.add(
        "import",
        "write a repository (VMs, kustomization, host config) from a host's domains or a KubeVirt "
        "export; every domain imported plans with no change",
        "  reconciler import --connect qemu:///system --output-dir ./fleet\n"
        "  reconciler import --connect qemu:///system --match 'web-*' --output-dir ./web\n"
        "  reconciler import --connect qemu:///system --keep-unsupported --output-dir ./fleet\n"
        "  reconciler import --from-kubevirt export.yaml --output-dir ./from-cluster",
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
        help="the default: the domain XML KubeVirt's fields cannot say (SPICE, <pm>, libosinfo metadata, ...) "
        "is kept in each VM's reconciler.kubevirt.io/domain-xml-passthrough annotation, where its allowlist "
        "lets it (docs/passthrough.md)",
    )
    p.add_argument(
        "--no-passthrough",
        action="store_true",
        help="write no pass-through: a domain with XML KubeVirt's fields cannot say is left out instead",
    )
    p.add_argument("--no-git", action="store_true", help="write the files only (no git repository)")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text", help="summary format")
    p.set_defaults(func=cmd_import)

    p = commands.add(
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
    p.add_argument(
        "--once",
        action="store_true",
        help="reconcile the head, host moves and paced restarts finished, and exit (0 applied and Healthy, "
        "1 not: what is left is printed: an error, a move, a halted rollout, a timeout)",
    )
    p.add_argument(
        "--timeout",
        type=_duration,
        default=None,
        help="with --once: how long to wait for paced restarts to finish (default 10m)",
    )
    p.add_argument(
        "--show-plans", action="store_true", help="print every plan that changes something, and the VM table"
    )
    p.set_defaults(func=cmd_run)

    p = commands.add(
        "status",
        "table of managed VMs per host, from libvirt and the daemon's state file",
        "  reconciler status\n  reconciler status --connect qemu:///system -o json",
        "exit codes: 0 shown and the last reconcile succeeded, 1 it did not (BuildFailed, ApplyFailed, ...), "
        "the state file is missing or unreadable, or every host is unreachable",
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


def _duration(text: str) -> float:
    """``--timeout 10m``: a duration (``90s``, ``10m``, ``1h``)."""
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
