"""Command line: build / expand / render / validate / diff / plan / apply / run / status.

Input: argv. Output: text on stdout, errors on stderr, exit codes: 0 no changes (or
success), 2 changes, 1 error — so CI can tell drift from breakage. I/O shell only:
every decision is made by the stages it calls.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.errors import ReconcilerError

if TYPE_CHECKING:  # heavy imports stay lazy: each command imports what it runs
    from reconciler.catalog import Catalog
    from reconciler.hostconfig import HostConfig
    from reconciler.hostfacts import HostFacts
    from reconciler.model import Manifest, RestartWindow, RevisionInfo, VMStatus

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2
DEFAULT_URI = "test:///default"


def _err(msg: str) -> None:
    print(f"reconciler: {msg}", file=sys.stderr)


# -- shared option groups -------------------------------------------------------------


def _warn_once(warnings: Sequence[str]) -> None:
    """One stderr line per distinct cause, with the VMs it concerns."""
    from reconciler import warngroup

    for w in warngroup.group(warnings):
        _err(f"warning: {w}")


def _add_source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", default=".", help="git repository (default: current directory)")
    p.add_argument("--ref", default="HEAD", help="commit, branch or tag to read (default: HEAD)")
    p.add_argument("--path", default="", help="entry directory inside the repository (default: its root)")


def _add_facts_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host-facts",
        default=None,
        metavar="FILE",
        help="check every VM against a host's facts (from `reconciler host-facts`), as plan does there",
    )


def _reader(args: argparse.Namespace) -> Callable[[str], bytes]:
    """Reads the files VMs came from (to point at a field's line)."""
    from reconciler import source

    if args.files:
        return lambda name: Path(name).read_bytes()
    return source.read_snapshot(args.repo, args.ref).files.read


def _add_host_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--connect", default=DEFAULT_URI, help=f"libvirt URI (default: {DEFAULT_URI})")
    p.add_argument("--host-config", default=None, help="host configuration YAML")
    p.add_argument("--prune", action="store_true", help="undefine managed domains whose VM left git")
    p.add_argument("--max-prune-percent", type=int, default=30)
    p.add_argument("--rollout", choices=("Stage", "Restart"), default="Stage")
    p.add_argument("--no-self-heal", action="store_true", help="report drift only, do not revert it")
    p.add_argument(
        "--owner",
        default=None,
        help="owner identity in the ownership mark (default: REPO#PATH, as the daemon's)",
    )
    p.add_argument(
        "--confirm-prune",
        default="",
        metavar="REVISION",
        help="let the prunes of this revision past the maxPrunePercent guard",
    )
    p.add_argument(
        "--restart-window",
        action="append",
        default=[],
        metavar="'SCHEDULE; DURATION[; TZ]'",
        help="restart-class changes under rollout Restart wait for this window (repeatable)",
    )
    p.add_argument("--restart-now", action="store_true", help="restart at once, whatever the restart windows")


# -- build ----------------------------------------------------------------------------


def cmd_build(args: argparse.Namespace) -> int:
    """Print DIR's overlay output like ``kustomize build DIR``; on error nothing on stdout.

    The root everything must stay inside is ``--root``, else the enclosing git work
    tree's top level, else the filesystem root — then only kustomize's own rule holds
    (plain files in or below the kustomization that names them).
    """
    from reconciler import manifests, overlays, source

    target = Path(args.dir).resolve()
    if not target.is_dir():
        _err(f"{args.dir}: not a directory")
        return EXIT_ERROR
    root = Path(args.root).resolve() if args.root else _build_root(target)
    if root != target and root not in target.parents:
        _err(f"{args.dir}: not inside the root {root}")
        return EXIT_ERROR
    entry = target.relative_to(root).as_posix()
    docs = overlays.build(source.DirView(root), "" if entry == "." else entry)
    sys.stdout.write(manifests.dump_documents(m.obj for m in docs))
    return EXIT_OK


def _build_root(target: Path) -> Path:
    for parent in (target, *target.parents):
        if (parent / ".git").exists():
            return parent
    return Path(target.anchor or "/")


# -- expand ---------------------------------------------------------------------------


def _host_config(path: str | None) -> HostConfig:
    """The host configuration of ``--host-config`` (the demo one when not given)."""
    from reconciler import hostconfig

    if path:
        return hostconfig.load_host_config(Path(path).read_bytes(), path)
    return hostconfig.HostConfig()


def _host_facts(path: str | None) -> HostFacts | None:
    """The facts file of ``--host-facts`` (written by ``reconciler host-facts``), if given."""
    from reconciler import hostfacts

    if not path:
        return None
    return hostfacts.facts_from_json(Path(path).read_bytes(), path)


def _load_catalog(args: argparse.Namespace) -> tuple[Catalog, dict[str, dict[str, RevisionInfo]]]:
    """The catalog of ``-f FILE...`` or of ``--repo/--ref/--path``, with ``git:`` revision pins.

    Raises ManifestError (file:line) for a broken input.
    """
    from reconciler import catalog as catalog_stage
    from reconciler import manifests, source
    from reconciler.expand.pins import git_pins
    from reconciler.reconcile import build_catalog_at, git_catalog_at

    if args.files:
        docs: list[Manifest] = []
        sources: dict[str, bytes] = {}
        for name in args.files:
            sources[name] = Path(name).read_bytes()
            docs.extend(manifests.parse_documents(sources[name], name))
        return catalog_stage.build_catalog(docs, sources.__getitem__), {}
    snapshot = source.read_snapshot(args.repo, args.ref)
    cat = build_catalog_at(snapshot.files, args.path)
    problems: list[str] = []
    pins = git_pins(cat, git_catalog_at(args.repo, args.path), problems)
    for problem in problems:
        _err(problem)
    return cat, pins


def cmd_expand(args: argparse.Namespace) -> int:
    """Print every VirtualMachine expanded; a VM that fails goes to stderr only (exit 1)."""
    import json

    from reconciler import expand, manifests
    from reconciler.errors import ManifestError

    try:
        cat, pinned = _load_catalog(args)
    except ManifestError as err:
        _err(str(err))
        return EXIT_ERROR
    expanded, errors = expand.expand_all(cat, pinned)
    _warn_once([*cat.warnings, *(w for vm in expanded for w in vm.warnings)])
    for error in errors:
        _err(str(error))
    objs = [vm.vm for vm in expanded]
    if args.output == "json":
        doc = objs[0] if len(objs) == 1 else {"apiVersion": "v1", "kind": "List", "items": objs}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    elif objs:
        sys.stdout.write(manifests.dump_documents(objs))
    return EXIT_ERROR if errors else EXIT_OK


# -- render ---------------------------------------------------------------------------


def cmd_render(args: argparse.Namespace) -> int:
    """Print each VM's domain XML, preceded by comments naming the volumes it needs."""
    from reconciler import expand
    from reconciler import render as render_stage
    from reconciler.errors import ManifestError
    from reconciler.escape import xml_comment
    from reconciler.reconcile import unrunnable

    try:
        host = _host_config(args.host_config)
        facts = _host_facts(args.host_facts)
        cat, pinned = _load_catalog(args)
    except (OSError, ManifestError) as err:
        _err(str(err))
        return EXIT_ERROR
    warnings = list(cat.warnings)
    expanded, errors = expand.expand_all(cat, pinned)
    failed = bool(errors)
    for error in errors:
        _err(str(error))
    caps = facts.caps if facts is not None else render_stage.HostCaps.default()
    out: list[str] = []
    for vm in expanded:
        try:
            rendered = render_stage.render_domain(vm, host, caps)
        except ReconcilerError as err:
            _err(f"{vm.source.where()}: {err}")
            failed = True
            continue
        if facts is not None:
            problems = unrunnable(vm, rendered, host, facts, _reader(args))
            for problem in problems:
                _err(problem)
            if problems:
                failed = True
                continue
        warnings += rendered.warnings
        head = f"{rendered.subject} from {rendered.source_path}: runStrategy {rendered.run_strategy}"
        out.append(f"<!-- {xml_comment(head)} -->\n")
        for vol in rendered.volumes:
            out.append(f"<!-- {xml_comment('volume: ' + render_stage.describe_volume(vol))} -->\n")
        out.append(rendered.xml)
    _warn_once(warnings)
    sys.stdout.write("".join(out))
    return EXIT_ERROR if failed else EXIT_OK


# -- validate / diff --------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    """Build, expand and render one revision; print every error with file:line (exit 1)."""
    from reconciler import render, source
    from reconciler.reconcile import desired_state

    host = _host_config(args.host_config)
    facts = _host_facts(args.host_facts)
    snapshot = source.read_snapshot(args.repo, args.ref)
    caps = facts.caps if facts is not None else render.HostCaps.default()
    desired = desired_state(snapshot, args.path, host, caps, facts=facts)
    _warn_once(desired.warnings)
    for e in desired.all_errors:
        print(e)
    where = f"{args.ref} ({snapshot.commit[:12]})" + (f", entry {args.path}" if args.path else "")
    if desired.all_errors:
        n = len(desired.all_errors)
        _err(f"{where}: {n} error{'s' if n != 1 else ''}")
        return EXIT_ERROR
    print(f"{where}: valid, {len(desired.rendered)} VM{'s' if len(desired.rendered) != 1 else ''}")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    """What merging --head into --base does to the VMs; exit 0 none, 2 changes, 1 error in head."""
    import os

    from reconciler import prdiff, render, source

    host = _host_config(args.host_config)
    facts = _host_facts(args.host_facts)
    base = source.read_snapshot(args.repo, args.base)
    head = source.read_snapshot(args.repo, args.head)
    caps = facts.caps if facts is not None else render.HostCaps.default()
    result = prdiff.diff_snapshots(base, head, args.path, host, caps, facts)
    if args.format == "json":
        sys.stdout.write(prdiff.format_json(result))
    elif args.format == "markdown":
        sys.stdout.write(prdiff.format_markdown(result))
    else:
        color = not args.no_color and not os.environ.get("NO_COLOR") and sys.stdout.isatty()
        sys.stdout.write(prdiff.format_text(result, color=color, verbose=args.verbose))
    if args.format != "text":
        for e in result.errors:
            _err(e)
    return result.exit_code


# -- plan / apply ---------------------------------------------------------------------


def _target(args: argparse.Namespace) -> object:
    from reconciler.model import Rollout
    from reconciler.ownership import default_owner
    from reconciler.plan import PlanPolicy
    from reconciler.reconcile import HostTarget

    config = _host_config(args.host_config)
    policy = PlanPolicy(
        host=config.name,
        claim_unselected=config.claim_unselected,
        prune=args.prune,
        max_prune_percent=args.max_prune_percent,
        self_heal=not args.no_self_heal,
        rollout=Rollout(args.rollout),
        owner=args.owner or default_owner(args.repo, args.path),
        confirm_prune=args.confirm_prune.lower(),
        restart_windows=_restart_windows(args.restart_window),
        restart_now=args.restart_now,
    )
    return HostTarget(uri=args.connect, config=config, policy=policy)


def _restart_windows(values: Sequence[str]) -> tuple[RestartWindow, ...]:
    from reconciler import windows
    from reconciler.errors import ConfigError

    try:
        return tuple(windows.parse_annotation(v) for v in values)
    except ValueError as err:
        raise ConfigError(f"--restart-window: {err}", "") from err


def _plan_or_apply(args: argparse.Namespace, dry_run: bool) -> int:
    from reconciler import source
    from reconciler.hypervisor import Hypervisor
    from reconciler.plan import format_plan
    from reconciler.reconcile import HostTarget, reconcile_once
    from reconciler.status import format_table, vm_statuses

    target = _target(args)
    assert isinstance(target, HostTarget)
    snapshot = source.read_snapshot(args.repo, args.ref)
    with Hypervisor(target.uri) as hv:
        plan, status = reconcile_once(snapshot, args.path, target, hv, dry_run=dry_run)
        print(format_plan(plan, verbose=args.verbose))
        if not dry_run:
            rows = vm_statuses(plan, status.results, hv.list_domains(), target.policy.host or hv.hostname())
            print()
            print(format_table(rows))
    if plan.errors or status.reason != "Succeeded":
        for e in plan.errors or (status.message,):
            _err(e)
        return EXIT_ERROR
    drift = any(c.drift for c in plan.changes)  # reported only (selfHeal off) is still a difference
    return EXIT_CHANGES if (dry_run and (plan.has_changes or drift)) else EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    return _plan_or_apply(args, dry_run=True)


def cmd_apply(args: argparse.Namespace) -> int:
    return _plan_or_apply(args, dry_run=False)


# -- run / status ---------------------------------------------------------------------


def cmd_host_facts(args: argparse.Namespace) -> int:
    """Read the host's facts and write them as JSON (``--host-facts FILE`` reads them back)."""
    from reconciler.hostfacts import facts_to_json
    from reconciler.hypervisor import Hypervisor

    config = _host_config(args.host_config)
    with Hypervisor(args.connect) as hv:
        text = facts_to_json(hv.host_facts(img.path for img in config.images.values()))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from reconciler import daemon

    return daemon.main(args)


def cmd_status(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from reconciler import config as daemon_config
    from reconciler import state_store
    from reconciler.errors import HypervisorError
    from reconciler.hypervisor import Hypervisor
    from reconciler.status import format_table, live_rows, read_state, summary_lines

    cfg = None
    if args.config or Path(daemon_config.DEFAULT_CONFIG).exists():
        cfg = daemon_config.load_config(
            args.config, daemon_config.Overrides(repo=".", state_dir=args.state_dir)
        )
    state_dir = args.state_dir or (cfg.state_dir if cfg else daemon_config.DEFAULT_STATE_DIR)
    state = read_state(state_dir)
    # Hosts: --connect, else the config file's, else those the daemon recorded, else the demo driver.
    hosts: list[tuple[str, str]] = []
    if args.connect:
        hosts = [(state_store.host_name_for(args.connect, cfg, state), args.connect)]
    elif cfg is not None:
        hosts = [(h.config.name, h.uri) for h in cfg.hosts]
    elif state.get("hosts"):
        hosts = [(name, str(h.get("uri", ""))) for name, h in sorted(state["hosts"].items())]
    else:
        hosts = [("", DEFAULT_URI)]
    recorded = state.get("vms", [])
    rows: list[VMStatus] = []
    unreachable = []
    for name, uri in hosts:
        try:
            with Hypervisor(uri) as hv:
                host = name or hv.hostname()
                rows.extend(live_rows(recorded, hv.list_domains(), host, args.all))
        except HypervisorError as err:
            unreachable.append(f"{uri}: {err}")
            rows.extend(live_rows(recorded, None, name or uri))
    if args.output == "json":
        out = {
            "attempted_revision": state.get("attempted_revision", ""),
            "applied_revision": state.get("applied_revision", ""),
            "reason": state.get("reason", ""),
            "message": state.get("message", ""),
            "failed_commit": state.get("failed_commit", ""),
            "hosts": state.get("hosts", {}),
            "unreachable": unreachable,
            "vms": [asdict(r) for r in rows],
            "history": state.get("history", []),
        }
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        print(format_table(rows))
        lines = summary_lines(state) + [f"unreachable: {u}" for u in unreachable]
        if lines:
            print()
            print("\n".join(lines))
    return EXIT_ERROR if unreachable and len(unreachable) == len(hosts) else EXIT_OK


# -- parser ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reconciler", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--log-format", choices=("auto", "console", "json"), default="auto")
    parser.add_argument("--log-level", default="info")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="overlay output, like `kustomize build DIR`")
    p.add_argument("dir")
    p.add_argument(
        "--root", default=None, help="read nothing outside this directory (default: the git work tree)"
    )
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("expand", help="print VMs with instancetype, preference, presets and defaults applied")
    _add_source_args(p)
    p.add_argument(
        "-f", "--file", action="append", dest="files", default=[], help="YAML file(s) instead of a repo"
    )
    p.add_argument("--output", "-o", choices=("yaml", "json"), default="yaml")
    p.set_defaults(func=cmd_expand)

    p = sub.add_parser("render", help="print the libvirt domain XML of each VM")
    _add_source_args(p)
    p.add_argument(
        "-f", "--file", action="append", dest="files", default=[], help="YAML file(s) instead of a repo"
    )
    p.add_argument("--host-config", default=None, help="host configuration YAML")
    _add_facts_arg(p)
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("validate", help="check a revision: build, expand, render; exit 1 on any error")
    _add_source_args(p)
    p.add_argument("--host-config", default=None)
    _add_facts_arg(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "diff",
        help="what merging HEAD into BASE does to the VMs (no host needed; exit 0 none, 2 changes, 1 error)",
    )
    p.add_argument("--repo", default=".", help="git repository (default: current directory)")
    p.add_argument("--base", required=True, help="ref the change is merged into (e.g. origin/main)")
    p.add_argument("--head", default="HEAD", help="ref with the change (default: HEAD)")
    p.add_argument("--path", default="", help="entry directory inside the repository (default: its root)")
    p.add_argument("--host-config", default=None, help="host configuration YAML to render with")
    _add_facts_arg(p)
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--no-color", action="store_true", help="no ANSI colours in text output")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="text: also the libvirt XML path behind each field"
    )
    p.set_defaults(func=cmd_diff)

    for name, func, text in (
        ("plan", cmd_plan, "what apply would do on a host (exit 2 when there are changes)"),
        ("apply", cmd_apply, "converge a host to a revision"),
    ):
        p = sub.add_parser(name, help=text)
        _add_source_args(p)
        _add_host_args(p)
        p.add_argument("-v", "--verbose", action="store_true", help="also list unchanged domains")
        p.set_defaults(func=func)

    p = sub.add_parser("host-facts", help="write what a libvirt host offers as JSON (for --host-facts in CI)")
    p.add_argument("--connect", default="test:///default", help="libvirt URI (default: test:///default)")
    p.add_argument(
        "--host-config", default=None, help="host configuration YAML (its image files are checked too)"
    )
    p.add_argument("--output", "-o", default="-", help="file to write (default: standard output)")
    p.set_defaults(func=cmd_host_facts)

    p = sub.add_parser("run", help="the daemon: watch the repository and converge the hosts")
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
    p.add_argument("--once", action="store_true", help="reconcile once and exit")
    p.add_argument(
        "--show-plans", action="store_true", help="print every plan that changes something, and the VM table"
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "status", help="table of managed VMs per host, from libvirt and the daemon's state file"
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
    p.add_argument("--output", "-o", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_status)
    return parser


# Commands that log nothing (they print): start-up without the logging library.
_QUIET = frozenset({"build", "expand", "render", "validate", "diff"})


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    collecting = gc.isenabled()
    if args.command in _QUIET:
        # One short run building large acyclic trees (a fleet's documents, domains): the
        # cyclic collector would only rescan them, a third of the run at 5000 VMs.
        gc.disable()
    else:
        from reconciler.log import setup_logging

        setup_logging(args.log_format, args.log_level)
    try:
        code: int = args.func(args)
    except ReconcilerError as err:
        _err(str(err))
        return EXIT_ERROR
    except (OSError, ValueError) as err:
        _err(str(err))
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    finally:
        if collecting:
            gc.enable()
    return code


if __name__ == "__main__":
    sys.exit(main())
