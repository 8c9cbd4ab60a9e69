"""An image reference in words: what the plan and status say of a VM's images.

Input: the reference as the VM writes it, the digest the host resolved it to, the file
a volume is made from. Output: one line. Pure; imports nothing of the project.
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


__all__ = ["ARROW", "image_line"]
