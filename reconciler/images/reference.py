"""Image references for the registry: ``RegistryError`` (what a resolution or a pull
refuses, never with a credential), and the references themselves, parsed as the
container runtime reads them (``model.imageref``, where render checks them too),
re-exported. (Pull policies are applied where the store is: ``images.resolve``.)
"""

from __future__ import annotations

from reconciler.errors import ReconcilerError
from reconciler.model.imageref import DOCKER_HUB, MAX_REFERENCE, Reference, is_digest, parse_reference
from reconciler.wording.escape import printable, shortened


class RegistryError(ReconcilerError):
    """An image could not be resolved or pulled from a registry, or was refused.

    ``reason`` alone, the ``image`` and ``subject`` (``vm/<name>``, "" for the CLI) as
    fields; ``str`` is ``subject: image IMAGE: reason``, never with a credential. ``transient``: a network or
    registry failure that may pass (a refusal, a bad reference or a missing image do not)."""

    def __init__(self, reason: str, image: str = "", subject: str = "", transient: bool = False) -> None:
        self.reason = reason
        self.image = image
        self.subject = subject
        self.transient = transient
        text = f"image {image}: {reason}" if image else reason
        super().__init__(printable(shortened(f"{subject}: {text}" if subject else text)))


__all__: list[str] = [
    "DOCKER_HUB",
    "MAX_REFERENCE",
    "Reference",
    "RegistryError",
    "is_digest",
    "parse_reference",
]
