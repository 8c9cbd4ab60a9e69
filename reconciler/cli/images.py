"""``reconciler images ls | pull REF | prune [--dry-run]``: the host's image store.

Input: the host config (``--host-config``: its ``imageStore`` and, for registries, its
``registries``), a reference, the host's libvirt (``prune``: every domain's disks).
Output: the store's references with their digests (``ls``, text or JSON), one image
fetched and checked into the store (``pull``: for operators, and to seed an
air-gapped host), the files no domain uses any more removed (``prune``).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, default_uri, read_host_config, say_error
from reconciler.wording import images as images_words

if TYPE_CHECKING:
    import argparse

    from reconciler.cli.common import Adding
    from reconciler.images.sources import RefKind


def kind_of(ref: str) -> tuple[RefKind, str]:
    """How a reference given on the command line is fetched: ``http(s)://`` a download,
    ``docker://`` a DataVolume registry URL, anything else a containerDisk image."""
    if ref.startswith(("http://", "https://")):
        return "http", ref
    if ref.startswith("docker://"):
        return "registry", ref.removeprefix("docker://")
    return "containerDisk", ref


def cmd_images_ls(args: argparse.Namespace) -> int:
    from reconciler.images.store import ImageStore

    store = ImageStore(read_host_config(args.host_config).image_store)
    entries = store.entries()
    if args.output == "json":
        doc = [
            {
                "image": e.ref,
                "digest": e.digest,
                "file": str(store.blob(e.file_digest)),
                "format": e.format,
                "resolvedAt": e.resolved_at,
                "lastUsed": e.last_used,
            }
            for e in entries
        ]
        sys.stdout.write(json.dumps({"images": doc}, indent=2) + "\n")
        return EXIT_OK
    for e in entries:
        size = store.blob(e.file_digest).stat().st_size if store.blob(e.file_digest).is_file() else 0
        print(f"{e.ref}  {e.digest}  {e.format}  {size} bytes")
    print(images_words.store_line(len(entries), store.used_bytes(), store.max_bytes, str(store.root)))
    return EXIT_OK


def cmd_images_pull(args: argparse.Namespace) -> int:
    from reconciler.images.resolve import Use, fetch_one
    from reconciler.images.sources import ImageError, ImageRef
    from reconciler.images.stage import sources_for
    from reconciler.images.store import ImageStore

    host = read_host_config(args.host_config)
    store = ImageStore(host.image_store)
    kind, key = kind_of(args.ref)
    use = Use(ImageRef(kind, key if kind != "http" else args.ref, "Always"), key, "", {})
    try:
        got = fetch_one(use, store, sources_for(store, host), None)
    except ImageError as err:
        say_error(f"image {args.ref}: {err}")
        return EXIT_ERROR
    print(f"{args.ref} → {got.digest} ({got.format}, {got.path})")
    return EXIT_OK


def cmd_images_prune(args: argparse.Namespace) -> int:
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.images.gc import collect
    from reconciler.images.store import ImageStore

    host = read_host_config(args.host_config)
    with Hypervisor(args.connect) as hv:
        xmls = [d.persistent_xml for d in hv.list_domains()] + [
            d.live_xml for d in hv.list_domains() if d.live_xml
        ]
    gone = collect(ImageStore(host.image_store), xmls, dry_run=args.dry_run)
    for path in gone:
        print(images_words.pruned(str(path), args.dry_run))
    print(images_words.pruned_count(len(gone), args.dry_run))
    return EXIT_OK


def add_images_command(commands: Adding) -> None:
    """``images`` and its three subcommands."""
    p = commands.add(
        "images",
        "the host's image store: list it, pull an image into it, prune what no domain uses",
        "  reconciler images ls --host-config host.yaml\n"
        "  reconciler images pull quay.io/containerdisks/fedora:41 --host-config host.yaml\n"
        "  reconciler images pull https://example.org/disk.qcow2.xz --host-config host.yaml\n"
        "  reconciler images prune --dry-run --connect qemu:///system --host-config host.yaml",
        "exit codes: 0 done, 1 error",
    )
    sub = p.add_subparsers(dest="images_command", metavar="ls|pull|prune", required=True)
    for name, text in (
        ("ls", "list the references the store holds, with their digests"),
        ("pull", "fetch an image into the store (checked as a plan checks it) and print its digest"),
        ("prune", "remove the images no domain of the host uses, unused for imageStore.gracePeriod"),
    ):
        s = sub.add_parser(name, help=text, description=text)
        s.add_argument("--host-config", default=None, help="host configuration YAML (its imageStore)")
        if name == "ls":
            s.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
            s.set_defaults(func=cmd_images_ls)
        elif name == "pull":
            s.add_argument(
                "ref",
                metavar="REF",
                help="an image (registry/repo:tag or @sha256:...), docker://..., or https://...",
            )
            s.set_defaults(func=cmd_images_pull)
        else:
            s.add_argument(
                "--connect",
                default=default_uri(),
                help="libvirt URI (LIBVIRT_DEFAULT_URI, else test:///default)",
            )
            s.add_argument(
                "--dry-run", action="store_true", help="name what would be removed, remove nothing"
            )
            s.set_defaults(func=cmd_images_prune)


__all__ = ["add_images_command", "kind_of"]
