"""Commands on a host: plan, apply, host-facts, run (the daemon), status.

Input: parsed arguments (and the daemon's config file). Output: plans, results and
status rows on stdout, prompts and errors on stderr, an exit code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.cli.common import (
    DEFAULT_URI,
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_OK,
    confirm,
    default_uri,
    note_work_tree,
    print_data,
    progress_printer,
    read_host_config,
    run_context,
    say_error,
)

if TYPE_CHECKING:  # heavy imports stay lazy: each command imports what it runs
    import argparse
    from collections.abc import Sequence

    from reconciler.config.daemon import DaemonConfig
    from reconciler.model import RestartWindow, VMStatus


def daemon_config_from(args: argparse.Namespace) -> DaemonConfig:
    """The configuration plan/apply act with: the daemon's file (``--config``) with the
    flags given on top, or the flags alone; ``targets.host_target`` resolves it."""
    from dataclasses import replace

    from reconciler.config import daemon as cfg_mod

    windows = restart_windows(args.restart_window or [])
    if args.config:
        cfg = cfg_mod.load_config(
            args.config, cfg_mod.Overrides(connect=args.connect, host_config=args.host_config)
        )
        policy = cfg.policy
        if args.prune:
            policy = replace(policy, prune=True)
        if args.max_prune_percent is not None:
            policy = replace(policy, max_prune_percent=args.max_prune_percent)
        if args.no_self_heal:
            policy = replace(policy, self_heal=False)
        if args.rollout is not None:
            policy = replace(policy, rollout=args.rollout)
        if args.owner:
            policy = replace(policy, owner=args.owner)
        if args.confirm_prune:
            policy = replace(policy, confirm_prune=args.confirm_prune.lower())
        if windows:
            policy = replace(policy, restart_windows=windows)
        return replace(cfg, policy=policy)
    policy = cfg_mod.Policy(
        prune=bool(args.prune),
        max_prune_percent=30 if args.max_prune_percent is None else args.max_prune_percent,
        self_heal=not args.no_self_heal,
        rollout=args.rollout,  # None: the host config's rollout, as the daemon reads it
        owner=args.owner or "",
        confirm_prune=(args.confirm_prune or "").lower(),
        restart_windows=windows,
    )
    entry = cfg_mod.HostEntry(args.connect or default_uri(), read_host_config(args.host_config))
    return cfg_mod.DaemonConfig(
        source=cfg_mod.SourceConfig(repo=args.repo or ".", path=args.path or ""),
        hosts=(entry,),
        policy=policy,
    )


def restart_windows(values: Sequence[str]) -> tuple[RestartWindow, ...]:
    from reconciler.config import windows
    from reconciler.errors import ConfigError

    try:
        return tuple(windows.parse_annotation(v) for v in values)
    except ValueError as err:
        raise ConfigError(f"--restart-window: {err}", "") from err


def _plan_or_apply(args: argparse.Namespace, dry_run: bool) -> int:
    from reconciler import source
    from reconciler.config import targets
    from reconciler.context import SERIAL
    from reconciler.desired import PipelineCache
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.model import Action
    from reconciler.plan import output as planout
    from reconciler.plan.text import format_plan, summary_line
    from reconciler.reconcile import reconcile_once
    from reconciler.source.settings import is_remote_url
    from reconciler.status import format_table, vm_statuses

    context = run_context(args)
    cfg = daemon_config_from(args)
    repo = args.repo or (cfg.source.repo if not is_remote_url(cfg.source.repo) else ".")
    path = cfg.source.path if args.path is None else args.path
    snapshot = source.read_snapshot(repo, args.ref)
    note_work_tree(repo, args.ref, path)
    text = args.output == "text"
    say = print if text else (lambda *_a, **_k: None)
    docs = []
    code = EXIT_OK
    for entry in cfg.hosts:
        target = targets.host_target(cfg, entry, restart_now=args.restart_now)
        with Hypervisor(target.uri) as hv:
            name = target.policy.host or hv.hostname()
            verb = "plan" if dry_run else "apply"
            say(f"{verb}: host {name} at {target.uri}, revision {snapshot.commit[:12]}, entry {path or '.'}")
            if targets.in_memory(target.uri):
                say(
                    f"  note: {target.uri} is {targets.TEST_DRIVER_NOTE}; give --connect or --config for a real host"
                )
            say(f"  {targets.describe(target)}")
            # One cache for the plan and the apply after it: the second pass re-reads the
            # host and re-plans, but expands, renders and compares only what changed.
            cache = PipelineCache()
            plan, status = reconcile_once(snapshot, path, target, hv, True, cache=cache, context=context)
            say(format_plan(plan, verbose=args.verbose))
            say(summary_line(plan, applied=False))
            results = None
            if plan.errors:
                for e in plan.errors:
                    say_error(e)
                code = EXIT_ERROR
            elif not dry_run and plan.has_changes:
                deletes = [c.name for c in plan.changes if c.action == Action.DELETE]
                question = f"delete {len(deletes)} domain(s) ({', '.join(deletes[:5])})?"
                if deletes and not args.yes and not confirm(question):
                    say_error("not applied: deletions need a yes (answer yes, or pass --yes)")
                    docs.append(planout.plan_document(plan, target, name))
                    code = EXIT_ERROR
                    continue
                progress = progress_printer() if text and sys.stdout.isatty() else None
                plan, status = reconcile_once(
                    snapshot,
                    path,
                    target,
                    hv,
                    cache=cache,
                    progress=progress,
                    context=context.with_mapper(SERIAL),
                )  # applied by threads: nothing forked
                results = status.results
                say()
                say(format_table(vm_statuses(plan, status.results, hv.list_domains(), name)))
                say(summary_line(plan, applied=True, results=status.results))
            elif not dry_run:
                results = ()
            docs.append(planout.plan_document(plan, target, name, results))
            if plan.errors:
                continue
            if status.reason != "Succeeded":
                say_error(status.message or str(status.reason))
                code = EXIT_ERROR
                continue
            drift = any(c.drift for c in plan.changes)  # reported only (selfHeal off) is still a difference
            if dry_run and (plan.has_changes or drift) and code == EXIT_OK:
                code = EXIT_CHANGES
    if not text:
        print_data({"plans": docs}, args.output)
    return code


def cmd_plan(args: argparse.Namespace) -> int:
    return _plan_or_apply(args, dry_run=True)


def cmd_apply(args: argparse.Namespace) -> int:
    return _plan_or_apply(args, dry_run=False)


def cmd_host_facts(args: argparse.Namespace) -> int:
    """Read the host's facts and write them as JSON (``--host-facts FILE`` reads them back)."""
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.hostfacts import facts_to_json

    config = read_host_config(args.host_config)
    with Hypervisor(args.connect) as hv:
        images = (img.path for img in config.images.values())
        facts = hv.host_facts(images, config.allowed_dirs, devices=bool(config.host_devices))
        text = facts_to_json(facts)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from reconciler.daemon.main import main

    return main(args)


def cmd_status(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from reconciler.config import daemon as daemon_config
    from reconciler.errors import HypervisorError
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.status import STATE_FILE, format_table, live_rows, summary_lines
    from reconciler.status import state as state_store

    cfg = None
    if args.config or Path(daemon_config.DEFAULT_CONFIG).exists():
        cfg = daemon_config.load_config(
            args.config, daemon_config.Overrides(repo=".", state_dir=args.state_dir)
        )
    state_dir = args.state_dir or (cfg.state_dir if cfg else daemon_config.DEFAULT_STATE_DIR)
    state, problem = state_store.read_checked(state_dir)
    if not state:  # the live rows still print; the daemon's view (sync, messages) is missing
        why = problem or "missing (has the daemon run with this state directory?)"
        say_error(f"warning: {Path(state_dir) / STATE_FILE}: {why}; showing libvirt's view only")
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
    if args.output in ("json", "yaml"):
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
        if args.output == "yaml":
            print_data(out, "yaml")
        else:
            print(json.dumps(out, indent=2, sort_keys=True))
    else:
        from reconciler.config import targets

        print("status: " + ", ".join(f"host {name or '?'} at {uri}" for name, uri in hosts))
        for _, uri in hosts:
            if targets.in_memory(uri):
                print(f"  note: {uri} is {targets.TEST_DRIVER_NOTE}: it shows no daemon's domains")
        print(format_table(rows))
        lines = summary_lines(state) + [f"unreachable: {u}" for u in unreachable]
        if lines:
            print()
            print("\n".join(lines))
    if not state:
        return EXIT_ERROR
    return EXIT_ERROR if unreachable and len(unreachable) == len(hosts) else EXIT_OK
