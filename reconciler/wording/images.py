"""An image reference in words: what the plan and status say of a VM's images, and what
``images ls`` and ``images prune`` say of the store.

Input: the reference as the VM writes it, the digest the host resolved it to, the file
a volume is made from; the store's counts, a file pruned. Output: one line. Pure;
imports nothing of the project.
"""

from __future__ import annotations

ARROW = "→"


def image_line(image: str, digest: str, backing: str) -> str:
    """``image http://h/tiny.qcow2 → sha256:…`` (resolved), ``… → the local file F``
    (the host config's ``images`` table), ``… (resolved by the host)`` (offline)."""
    if digest:
        return f"image {image} {ARROW} {digest}"
    if backing:
        return f"image {image} {ARROW} the local file {backing}"
    return f"image {image} (resolved by the host, into its image store)"


def store_line(images: int, used: int, budget: int, root: str) -> str:
    """``images ls``: the images the store holds and the bytes they take of its budget."""
    return f"{images} image(s), {used} of {budget} bytes in {root}"


def pruned(path: str, dry_run: bool) -> str:
    """``images prune``: a file removed (or, ``dry_run``, one that would be)."""
    return f"{'would remove' if dry_run else 'removed'} {path}"


def pruned_count(files: int, dry_run: bool) -> str:
    return f"{files} image file(s) {'would remove' if dry_run else 'removed'}"


__all__ = ["ARROW", "image_line", "pruned", "pruned_count", "store_line"]
