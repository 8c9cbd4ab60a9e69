"""``reconciler import``: a repository written from a host's domains or a KubeVirt export.

Input: parsed arguments: ``--connect URI`` with domain names or ``--match PATTERN``
(every domain when neither is given; what the YAML cannot say is kept in each VM's
pass-through unless ``--no-passthrough``), or ``--from-kubevirt FILE``; ``--output DIR``.
Output: the repository's files under DIR (a new directory, or an empty one; made a git
repository with one commit unless ``--no-git``), one progress line per domain on
stderr, and a summary of what was imported, adjusted and left out on stdout (``-o
json`` for data). Never changes a domain or the host: the import only reads it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.cli.common import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, say_error
from reconciler.wording.escape import os_error, printable

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence

    from reconciler.hostfacts import HostFacts
    from reconciler.importer import ImportResult


def _progress(line: str) -> None:
    print(f"reconciler: {line}", file=sys.stderr, flush=True)


class WriteRefused(Exception):
    """A file of the import that would land outside its directory, or on a file there."""


def write_repository(out: Path, files: Mapping[str, str], git: bool, message: str) -> None:
    """Write ``files`` under ``out`` (which must not exist or be empty); commit them.

    Each file is created below ``out`` only: its repository path is plain parts (no
    ``..``, no absolute path), its resolved place lies inside ``out``, every directory
    on the way is opened without following a symbolic link, and the file is created
    with ``O_EXCL | O_NOFOLLOW``: never over an existing file (``WriteRefused``)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WriteRefused(f"{out}: exists and is not an empty directory (the import never overwrites)")
    out.mkdir(parents=True, exist_ok=True)
    root = out.resolve()
    for rel in files:
        _check_below(root, rel)
    for rel, text in sorted(files.items()):
        _create_below(root, rel, text.encode("utf-8"))
    if git:
        from reconciler.source import init_repository

        init_repository(out, list(files), message)


def _check_below(root: Path, rel: str) -> None:
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise WriteRefused(f"{root}: {printable(rel)!r} is no path inside the repository (nothing written)")
    if not (root / rel).resolve().is_relative_to(root):
        raise WriteRefused(f"{root}: {printable(rel)!r} leads outside the repository (nothing written)")


def _create_below(root: Path, rel: str, data: bytes) -> None:
    _check_below(root, rel)
    parts = rel.split("/")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fd = os.open(root, flags)
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            try:
                sub = os.open(part, flags, dir_fd=fd)
            except OSError as err:
                raise WriteRefused(f"{root / rel}: {part} is not a directory of the import") from err
            os.close(fd)
            fd = sub
        try:
            out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
        except FileExistsError as err:
            raise WriteRefused(f"{root / rel}: exists (the import never overwrites a file)") from err
        with os.fdopen(out, "wb") as f:
            f.write(data)
    finally:
        os.close(fd)


def summary_text(result: ImportResult) -> str:
    from reconciler.wording import imported as words

    lines = []
    for o in result.outcomes:
        if o.status == "imported":
            lines.append(words.imported(o.source, o.path, o.notes))
        else:
            lines.append(words.left_out(o.source))
            lines.extend(f"    {why}" for why in o.reasons)
            lines.extend(f"    {words.note(n)}" for n in o.notes)
    adjusted = sum(1 for o in result.imported if o.notes)
    lines.append(words.summary(len(result.imported), adjusted, len(result.left_out)))
    return "\n".join(lines) + "\n"


def _selected(names: Sequence[str], domains: Sequence[str], pattern: str | None) -> list[str]:
    missing = [n for n in names if n not in domains]
    if missing:
        raise LookupError(f"no domain named {', '.join(repr(n) for n in missing)} on this host")
    if names:
        return list(dict.fromkeys(names))
    if pattern:
        return sorted(d for d in domains if fnmatch.fnmatchcase(d, pattern))
    return sorted(domains)


def cmd_import(args: argparse.Namespace) -> int:
    """Write a repository from a host's domains (``--connect``) or a KubeVirt export."""
    out = Path(args.output_dir)
    try:
        if args.from_kubevirt:
            if args.names or args.match or args.keep_unsupported or args.no_passthrough:
                say_error(
                    "import: --from-kubevirt takes no domain names, --match, --keep-unsupported or --no-passthrough"
                )
                return EXIT_ERROR
            result = _from_kubevirt(args.from_kubevirt)
            message = f"Import the KubeVirt export {Path(args.from_kubevirt).name}"
        else:
            result = _from_host(args)
            message = f"Import {len(result.imported)} domain(s) from {args.connect}"
        write_repository(out, result.files, not args.no_git, message)
    except (LookupError, WriteRefused) as err:
        say_error(f"import: {err.args[0] if isinstance(err, LookupError) else err}")
        return EXIT_ERROR
    except OSError as err:
        say_error(f"import: {os_error(err)}")
        return EXIT_ERROR
    if args.output == "json":
        print(json.dumps(result.as_json(), indent=2))
    else:
        sys.stdout.write(summary_text(result))
        if not args.from_kubevirt and result.imported:
            print(
                f"Check: reconciler plan --repo {out} --connect {args.connect} "
                f"--host-config {out / result.host_config_path}"
            )
    return EXIT_CHANGES if result.left_out else EXIT_OK


def _from_host(args: argparse.Namespace) -> ImportResult:
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.importer import import_domains

    with Hypervisor(args.connect) as hv:
        live = hv.list_domains()
        selected = _selected(args.names, [d.name for d in live], args.match)
        autostarted = hv.autostarted()
        host_name = args.host or hv.hostname()

        def facts_of(images: Sequence[str], dirs: Sequence[str]) -> HostFacts:
            return hv.host_facts(images, tuple(dirs), devices=True)

        return import_domains(
            live, selected, autostarted, facts_of, host_name, _progress, keep=not args.no_passthrough
        )


def _from_kubevirt(path: str) -> ImportResult:
    from reconciler.importer.kubevirt import import_export
    from reconciler.manifests.limits import read_regular_file

    return import_export(read_regular_file(path), Path(path).name, _progress)
