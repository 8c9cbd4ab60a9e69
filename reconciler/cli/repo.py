"""Commands on a repository alone, no host: build, expand, render, validate, diff.

Input: parsed arguments. Output: text on stdout, errors (file:line) on stderr, an exit
code. Every decision is made by the stages they call.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    fetched_source,
    inside_its_repository,
    locate_repo,
    note_work_tree,
    print_data,
    read_host_config,
    read_host_facts,
    run_context,
    say_error,
    sops_keys,
    source_reader,
    warn_once,
)

if TYPE_CHECKING:  # heavy imports stay lazy: each command imports what it runs
    import argparse
    from collections.abc import Sequence

    from reconciler.catalog import Catalog
    from reconciler.config.daemon import DaemonConfig, HostEntry
    from reconciler.desired import Desired
    from reconciler.model import Manifest, Obj, Problem, RevisionInfo, VMKey
    from reconciler.prdiff import PRDiff, StatedPolicy
    from reconciler.settings.host import HostConfig
    from reconciler.settings.targets import HostTarget


def cmd_build(args: argparse.Namespace) -> int:
    """Print DIR's overlay output like ``kustomize build DIR``; on error nothing on stdout.

    The root everything must stay inside is ``--root``, else the enclosing git work
    tree's top level, else the filesystem root — then only kustomize's own rule holds
    (plain files in or below the kustomization that names them).
    """
    from reconciler import manifests, overlays
    from reconciler.source.files import DirView

    if args.ref:
        return _build_committed(args)
    given = Path(args.dir).absolute()
    target = given.resolve()
    if not target.is_dir():
        say_error(f"{args.dir}: not a directory")
        return EXIT_ERROR
    # The root is found from the path as given: a committed symlink cannot carry the
    # build (and the root with it) outside the work tree.
    root = Path(args.root).resolve() if args.root else _build_root(given).resolve()
    if root != target and root not in target.parents:
        say_error(f"{args.dir}: resolves to {target}, outside the root {root} (a symlink?)")
        return EXIT_ERROR
    entry = target.relative_to(root).as_posix()
    keys = sops_keys(sealed_ok=not args.show_secrets)  # values shown are values, never stand-ins
    docs = overlays.build(DirView(root), "" if entry == "." else entry, keys=keys)
    warn_once(getattr(docs, "warnings", ()))
    sys.stdout.write(manifests.dump_documents(shown(docs, args.show_secrets)))
    return EXIT_OK


def _build_committed(args: argparse.Namespace) -> int:
    """``build --ref REF DIR``: DIR as committed at REF in the repository holding it."""
    from reconciler import manifests, overlays, source

    given = Path(args.dir).absolute()
    root = _build_root(given)
    if not (root / ".git").exists():
        say_error(f"{args.dir}: not inside a git work tree (--ref reads a commit)")
        return EXIT_ERROR
    entry = given.relative_to(root).as_posix() if given != root else ""
    snapshot = source.read_snapshot(root, args.ref)
    keys = sops_keys(sealed_ok=not args.show_secrets)  # values shown are values, never stand-ins
    docs = overlays.build(snapshot.files, "" if entry == "." else entry, keys=keys)
    warn_once(getattr(docs, "warnings", ()))
    sys.stdout.write(manifests.dump_documents(shown(docs, args.show_secrets)))
    return EXIT_OK


MASK = "**SECRET**"  # what `build` prints for a Secret's value (base64 of it under data)


def shown(docs: Sequence[Manifest], show_secrets: bool) -> list[Obj]:
    """The objects ``build`` prints: a Secret's values masked unless ``--show-secrets``
    (as ``flux build`` masks them); its keys, name and the rest as built."""
    import base64

    if show_secrets:
        return [m.obj for m in docs]
    masked_data = base64.b64encode(MASK.encode()).decode()
    out = []
    for m in docs:
        obj = m.obj
        if m.kind == "Secret":
            obj = dict(obj)
            for field, mask in (("data", masked_data), ("stringData", MASK)):
                if isinstance(obj.get(field), dict):
                    obj[field] = dict.fromkeys(obj[field], mask)
                elif field in obj:
                    obj[field] = MASK
        out.append(obj)
    return out


def _build_root(target: Path) -> Path:
    for parent in (target, *target.parents):
        if (parent / ".git").exists():
            return parent
    return Path(target.anchor or "/")


def _load_catalog(args: argparse.Namespace) -> tuple[Catalog, dict[VMKey, dict[str, RevisionInfo]]]:
    """The catalog of ``-f FILE...`` or of ``--repo/--ref/--path``, with ``git:`` revision pins.

    Raises ManifestError (file:line) for a broken input.
    """

    from reconciler import catalog as catalog_stage
    from reconciler import manifests, source
    from reconciler.context import Context
    from reconciler.desired.pins import build_catalog_at, git_catalog_at
    from reconciler.expand.pins import git_pins
    from reconciler.manifests import limits

    if args.files:
        docs: list[Manifest] = []
        sources: dict[str, bytes] = {}
        for name in args.files:
            sources[name] = limits.read_regular_file(name)
            docs.extend(manifests.parse_documents(sources[name], name))
        return catalog_stage.build_catalog(docs, sources.__getitem__), {}
    repo, path = locate_repo(args.repo, args.path)
    snapshot = source.read_snapshot(repo, args.ref)
    keys = sops_keys(sealed_ok=True)
    context = Context()  # the caches the pinned commits' builds share with this one
    cat = build_catalog_at(snapshot.files, path, context, keys=keys)
    catalog_at = git_catalog_at(source.snapshot_reader(repo), path, context, keys=keys)
    return cat, git_pins(cat, catalog_at)


def cmd_expand(args: argparse.Namespace) -> int:
    """Print every VirtualMachine expanded; a VM that fails goes to stderr only (exit 1)."""
    import json

    from reconciler import expand, manifests
    from reconciler.errors import ManifestError

    try:
        cat, pinned = _load_catalog(args)
    except ManifestError as err:
        say_error(str(err))
        return EXIT_ERROR
    expanded, errors = expand.expand_all(cat, pinned)
    warn_once([*cat.warnings, *(w for vm in expanded for w in vm.warnings)])
    for error in errors:
        say_error(str(error))
    objs = [vm.vm for vm in expanded]
    if args.output == "json":
        doc = objs[0] if len(objs) == 1 else {"apiVersion": "v1", "kind": "List", "items": objs}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    elif objs:
        sys.stdout.write(manifests.dump_documents(objs))
    return EXIT_ERROR if errors else EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    """Print each VM's domain XML, preceded by comments naming the volumes it needs."""
    from reconciler import render as render_stage
    from reconciler.desired import desired_from_catalog
    from reconciler.errors import ManifestError
    from reconciler.wording.escape import os_error, xml_comment
    from reconciler.wording.problems import words

    try:
        host = read_host_config(args.host_config)
        facts = read_host_facts(args.host_facts)
        cat, pinned = _load_catalog(args)
    except ManifestError as err:
        say_error(str(err))
        return EXIT_ERROR
    except OSError as err:
        say_error(os_error(err))
        return EXIT_ERROR
    caps = facts.caps if facts is not None else render_stage.HostCaps.default()
    desired = desired_from_catalog(cat, "", source_reader(args), host, caps, pinned, facts=facts)
    for error in desired.all_errors:
        say_error(words(error))
    out: list[str] = []
    for rendered in desired.rendered:
        head = f"{rendered.subject} from {rendered.source_path}: runStrategy {rendered.run_strategy}"
        out.append(f"<!-- {xml_comment(head)} -->\n")
        for vol in rendered.volumes:
            out.append(f"<!-- {xml_comment('volume: ' + render_stage.describe_volume(vol))} -->\n")
        out.append(rendered.xml)
    warn_once([*desired.warnings, *(w for d in desired.rendered for w in d.warnings)])
    sys.stdout.write("".join(out))
    return EXIT_ERROR if desired.all_errors else EXIT_OK


VALIDATE_SCHEMA_VERSION = 1  # `validate -o json` (reconciler/data/schemas/validate.schema.json)


def cmd_validate(args: argparse.Namespace) -> int:
    """Build, expand and render one revision; print every error with file:line (exit 1)."""

    from reconciler import render, source
    from reconciler.desired import desired_state
    from reconciler.desired.pins import git_catalog_at

    host = read_host_config(args.host_config)
    facts = read_host_facts(args.host_facts)
    placed: tuple[Problem, ...] = ()
    cfg: DaemonConfig | None = None
    if args.config:  # render for the daemon's host; VMs none of its hosts runs are warned of
        cfg, host = _daemon_host(args, host)
    elif args.host:
        say_error("--host: names a host of the daemon's config: give --config FILE too")
        return EXIT_ERROR
    given, entry, ref = _validated_source(args, cfg)
    repo, path = locate_repo(given or ".", entry)
    snapshot = source.read_snapshot(repo, ref)
    caps = facts.caps if facts is not None else render.HostCaps.default()
    keys = sops_keys(sealed_ok=True)
    context = run_context(args)
    catalog_at = git_catalog_at(source.snapshot_reader(repo), path, context, keys)
    desired = desired_state(
        snapshot, path, host, caps, catalog_at=catalog_at, facts=facts, context=context, keys=keys
    )
    note_work_tree(repo, ref, path, snapshot.files)
    if cfg is not None:
        from reconciler.plan.moves import unplaced

        hosts = {h.config.name: h.config.claim_unselected for h in cfg.hosts}
        placed = unplaced(desired.rendered, hosts, args.config)
    warnings = (*desired.warnings, *placed)
    return _validation_report(args, desired, snapshot.commit, ref, path, warnings)


def _daemon_host(args: argparse.Namespace, host: HostConfig) -> tuple[DaemonConfig, HostConfig]:
    """``validate --config``: the daemon's config, and the host config to render for:
    the one of ``--host`` (or of the config's only host) with the daemon's policy,
    else ``host`` as it is."""
    from reconciler.config import daemon as daemon_config
    from reconciler.config import daemon_file, targets

    for given in (args.config, args.host_config):
        if given:
            inside_its_repository(given)
    cfg = daemon_file.load_config(args.config, daemon_config.Overrides(host_config=args.host_config))
    if args.host is not None or len(cfg.hosts) == 1:
        host = daemon_config.resolved_policy(cfg, targets.pick_host(cfg, args.host).config)
    return cfg, host


def _validated_source(
    args: argparse.Namespace, cfg: DaemonConfig | None
) -> tuple[str | None, str | None, str]:
    """The repository, entry and ref ``validate`` reads: the repository ``--repo``, else
    the config's source (a remote one fetched as the daemon does), else the current
    directory (None); the entry ``--path``, else the config's, else ``--repo``'s."""
    given, entry, ref = args.repo, args.path, args.ref or "HEAD"
    if cfg is not None and given is None:
        from reconciler.model.identifiers import is_remote_url

        entry = cfg.source.path if entry is None else entry
        if is_remote_url(cfg.source.repo):
            given, head = fetched_source(cfg.source)
            ref = args.ref or head
        else:
            given = cfg.source.repo
    return given, entry, ref


def _validation_report(
    args: argparse.Namespace, desired: Desired, commit: str, ref: str, path: str, warnings: Sequence[Problem]
) -> int:
    """Print what ``validate`` found (``-o``: as data) and give its exit code."""
    from reconciler.wording.problems import error_json, group, words

    if args.output != "text":
        doc = {
            "schemaVersion": VALIDATE_SCHEMA_VERSION,
            "revision": commit,
            "ref": ref,
            "entry": path,
            "valid": not desired.all_errors,
            "vms": sorted(d.name for d in desired.rendered),
            "errors": [error_json(e) for e in desired.all_errors],
            "warnings": list(group(warnings)),
        }
        print_data(doc, args.output)
        return EXIT_ERROR if desired.all_errors else EXIT_OK
    warn_once(warnings)
    for e in desired.all_errors:
        print(words(e))
    where = f"{ref} ({commit[:12]})" + (f", entry {path}" if path else "")
    if desired.all_errors:
        n = len(desired.all_errors)
        say_error(f"{where}: {n} error{'s' if n != 1 else ''}")
        return EXIT_ERROR
    print(f"{where}: valid, {len(desired.rendered)} VM{'s' if len(desired.rendered) != 1 else ''}")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    """What merging HEAD into BASE does to the VMs; exit 0 none, 2 changes, 1 error in head."""
    from reconciler import prdiff, render, source
    from reconciler.config import targets
    from reconciler.desired.pins import git_catalog_at
    from reconciler.prdiff.history import MAX_ANCESTORS

    refs = _diff_refs(args)
    if isinstance(refs, str):
        say_error(refs)
        return EXIT_ERROR
    base_ref, head_ref = refs
    repo, path = args.repo, args.path
    if args.config:  # the daemon's policy, resolved as the daemon resolves it
        cfg, entry, repo, path = _daemon_entry(args)
    elif args.host:
        say_error("--host: names a host of the daemon's config: give --config FILE too")
        return EXIT_ERROR
    else:
        cfg = targets.hostless(read_host_config(args.host_config))
        entry = cfg.hosts[0]
    repo, path = locate_repo(repo or ".", path)
    target = targets.host_target(cfg, entry)
    stated = _stated_policy(args.config, target) if args.config else None
    facts = read_host_facts(args.host_facts)
    base = source.read_snapshot(repo, base_ref)
    head = source.read_snapshot(repo, head_ref)
    caps = facts.caps if facts is not None else render.HostCaps.default()
    keys = sops_keys(sealed_ok=True)
    context = run_context(args)
    result = prdiff.diff_snapshots(
        base,
        head,
        path,
        target.config,
        caps,
        facts,
        context,
        policy=target.policy,
        stated=stated,
        keys=keys,
        catalog_at=git_catalog_at(source.snapshot_reader(repo), path, context, keys),
        ancestors=lambda: source.first_parents(repo, base.commit, MAX_ANCESTORS),
    )
    note_work_tree(repo, head_ref, path, head.files)
    _print_diff(args, result)
    return result.exit_code


def _daemon_entry(args: argparse.Namespace) -> tuple[DaemonConfig, HostEntry, str | None, str | None]:
    """``diff --config``: the daemon's config, the host of ``--host`` (or its only one),
    and the repository and entry: ``--repo`` and ``--path``, else the config's source
    (a remote one: the current directory)."""
    from reconciler.config import daemon as daemon_config
    from reconciler.config import daemon_file, targets
    from reconciler.model.identifiers import is_remote_url

    # A review needs no key: the daemon's key file is not read (SOPS_AGE_KEY_FILE is).
    for given in (args.config, args.host_config):
        if given:
            inside_its_repository(given)
    cfg = daemon_file.load_config(
        args.config, daemon_config.Overrides(host_config=args.host_config, read_keys=False)
    )
    entry = targets.pick_host(cfg, args.host)
    repo = args.repo or (cfg.source.repo if not is_remote_url(cfg.source.repo) else ".")
    path = cfg.source.path if args.path is None else args.path
    return cfg, entry, repo, path


def _stated_policy(config: str, target: HostTarget) -> StatedPolicy:
    """The daemon's policy for the host, as the report states it."""
    from reconciler import prdiff
    from reconciler.settings import windows as restart_windows

    p = target.policy
    return prdiff.StatedPolicy(
        config=config,
        host=target.config.name,
        prune=p.prune,
        max_prune_percent=p.max_prune_percent,
        restart_windows=tuple(restart_windows.describe(w) for w in p.restart_windows),
    )


def _print_diff(args: argparse.Namespace, result: PRDiff) -> None:
    """The report on stdout in ``--format``; with json or markdown, head's errors on stderr too."""
    from reconciler import prdiff
    from reconciler.wording.problems import words

    if args.format == "json":
        sys.stdout.write(prdiff.format_json(result))
    elif args.format == "markdown":
        sys.stdout.write(prdiff.format_markdown(result))
    else:
        color = not args.no_color and not os.environ.get("NO_COLOR") and sys.stdout.isatty()
        sys.stdout.write(prdiff.format_text(result, color=color, verbose=args.verbose))
    if args.format != "text":
        for e in result.errors:
            say_error(words(e))


def _diff_refs(args: argparse.Namespace) -> tuple[str, str] | str:
    """(base, head) from ``diff BASE [HEAD]`` or ``--base``/``--head``; a usage error in words."""
    positional: list[str] = list(args.refs)
    if len(positional) > 2:
        return f"diff takes at most two refs (BASE [HEAD]), got {len(positional)}: {' '.join(positional)}"
    if positional and args.base is not None:
        return "give the base ref once: as the first argument or as --base"
    if len(positional) == 2 and args.head is not None:
        return "give the head ref once: as the second argument or as --head"
    base = positional[0] if positional else args.base
    if base is None:
        return "diff needs a base ref: `reconciler diff BASE [HEAD]` (or --base REF)"
    head = positional[1] if len(positional) == 2 else (args.head or "HEAD")
    return base, head
