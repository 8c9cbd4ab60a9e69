"""Identifiers: PCI addresses, USB ids, UUIDs, MAC addresses, DNS names, mdev types,
git remotes.

Input: the text of an identifier as a manifest, a host config or a daemon config
writes it. Output: whether it is one, and its parts or canonical text. Pure; never
raises on bad input (``None`` or ``False`` says "not one"), so each caller words the
refusal at its own field. The one place each of these grammars is read:

- a PCI address is ``dddd:bb:ss.f`` (``lspci -D``), hex of any case; the slot is at
  most ``1f`` and the function at most 7, as a PCI bus and libvirt have them;
- a USB id is ``vendor:product`` (``lsusb``), four hex digits each;
- a UUID is what libvirt and ``mdevctl`` read (hyphens optional), canonical in lower
  case with hyphens;
- a MAC address is six hex octets, ``:`` or ``-`` separated, canonical in lower case;
- a DNS-1123 label (a Kubernetes namespace) is at most 63 characters of lower-case
  letters, digits and ``-``, starting and ending with a letter or digit; a DNS-1123
  subdomain (a Kubernetes name) at most 253 characters of such labels joined by ``.``;
- a key of a ConfigMap or Secret (one file of a mounted object) is at most 253
  letters, digits, ``-``, ``_`` and ``.``, and neither ``.`` nor starts with ``..``;
- an mdev type id (``nvidia-222``, ``i915-GVTg_V5_4``) starts with a letter or digit,
  then letters, digits, ``_``, ``.``, ``:`` and ``-``;
- a git repository is remote when it is a URL (``https://``, ``ssh://``, ``file://``)
  or scp-like (``git@host:path``), else a local path; a remote's normalized form names
  the repository whatever the clone used: host (lower case) and path, without scheme,
  user, credentials, port, query, ``.git`` or a trailing ``/`` (``https://tok@GitHub.com/a/b.git``,
  ``ssh://git@github.com:22/a/b`` and ``git@github.com:a/b`` are all ``github.com/a/b``);
  a ``file://`` URL or a path is its path.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# -- PCI and USB -----------------------------------------------------------------------

PCI_FORM = "dddd:bb:ss.f"
_PCI = re.compile(r"([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([01][0-9a-fA-F])\.([0-7])")


class PciAddress(NamedTuple):
    domain: int
    bus: int
    slot: int
    function: int

    @property
    def text(self) -> str:
        """``0000:65:00.0``."""
        return f"{self.domain:04x}:{self.bus:02x}:{self.slot:02x}.{self.function:x}"

    def attributes(self) -> dict[str, str]:
        """The attributes of libvirt's ``<address>`` (``domain="0x0000"`` ...)."""
        return {
            "domain": f"0x{self.domain:04x}",
            "bus": f"0x{self.bus:02x}",
            "slot": f"0x{self.slot:02x}",
            "function": f"0x{self.function:x}",
        }


def parse_pci(text: object) -> PciAddress | None:
    """``"0000:65:00.0"`` -> ``PciAddress(0, 0x65, 0, 0)``; None when it is not one."""
    m = _PCI.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        return None
    d, b, s, f = (int(g, 16) for g in m.groups())
    return PciAddress(d, b, s, f)


USB_FORM = "vendor:product"
_USB = re.compile(r"([0-9a-fA-F]{4}):([0-9a-fA-F]{4})")


class UsbId(NamedTuple):
    vendor: int
    product: int

    @property
    def text(self) -> str:
        """``1d6b:0002``."""
        return f"{self.vendor:04x}:{self.product:04x}"


def parse_usb(text: object) -> UsbId | None:
    """``"1d6b:0002"`` -> ``UsbId(0x1d6b, 2)``; None when it is not one."""
    m = _USB.fullmatch(text) if isinstance(text, str) else None
    return UsbId(int(m.group(1), 16), int(m.group(2), 16)) if m else None


# -- UUIDs and MAC addresses -----------------------------------------------------------


def parse_uuid(text: object) -> str | None:
    """The canonical text of a UUID (``6A1A24A1406146078BF4A3963D0C5895`` ->
    ``6a1a24a1-4061-4607-8bf4-a3963d0c5895``); None when it is not one."""
    if not isinstance(text, str):
        return None
    import uuid  # its import reads the platform: only where a UUID is parsed

    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


_MAC = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")


def parse_mac(text: object) -> str | None:
    """``"52-54-00-AB-CD-EF"`` -> ``"52:54:00:ab:cd:ef"``; None when it is not one."""
    if not isinstance(text, str):
        return None
    mac = text.lower().replace("-", ":")
    return mac if _MAC.fullmatch(mac) else None


# -- names -----------------------------------------------------------------------------

MAX_DNS_LABEL = 63
MAX_DNS_SUBDOMAIN = 253
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def is_dns_label(text: object) -> bool:
    """A DNS-1123 label (``my-ns``), as Kubernetes checks a namespace."""
    return isinstance(text, str) and len(text) <= MAX_DNS_LABEL and _LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: object) -> bool:
    """A DNS-1123 subdomain (``web.eu-1``), as Kubernetes checks an object's name."""
    return (
        isinstance(text, str)
        and len(text) <= MAX_DNS_SUBDOMAIN
        and all(_LABEL.fullmatch(part) for part in text.split("."))
    )


_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
CONFIG_KEY_FORM = "letters, digits, '-', '_' and '.' (not '.' or '..' or a name starting with '..')"


def is_config_key(text: object) -> bool:
    """A key of a ConfigMap or Secret, as Kubernetes checks it (``IsConfigMapKey``): one
    file name of a mounted object, so never ``""``, ``.``, ``..``, ``../x`` or ``a/b``."""
    return (
        isinstance(text, str)
        and len(text) <= MAX_DNS_SUBDOMAIN
        and _CONFIG_KEY.fullmatch(text) is not None
        and text != "."
        and not text.startswith("..")
    )


_MDEV_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


def is_mdev_type(text: object) -> bool:
    """A mediated device type id as sysfs names it (``nvidia-222``)."""
    return isinstance(text, str) and _MDEV_TYPE.fullmatch(text) is not None


# -- git repositories ------------------------------------------------------------------

_SCP_URL = re.compile(r"[\w.+-]+@[\w.-]+:")


def is_remote_url(repo: str) -> bool:
    """URLs (``https://``, ``ssh://``, ``file://``) and scp-like ``git@host:path`` are
    remotes; anything else is a local path."""
    return "://" in repo or bool(_SCP_URL.match(repo))


_URL = re.compile(r"^(?P<scheme>[A-Za-z][\w+.-]*)://(?P<authority>[^/]*)(?P<path>.*)$")
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>.*)$")


def normalized_remote(repo: str) -> str:
    """The repository a clone's remote names, the same for every way of spelling it (see
    the module doc); a local path is returned as it is, less ``.git`` and ``/``."""
    m = _URL.match(repo)
    if m:  # a query or fragment (``?private_token=...``) names no repository
        m = _URL.match(re.split(r"[?#]", repo, maxsplit=1)[0])
    if m and m["scheme"].lower() == "file":
        where = m["path"]
    elif m:
        host = m["authority"].rsplit("@", 1)[-1]
        host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        where = f"{host.lower()}/{m['path'].lstrip('/')}"
    elif (scp := _SCP.match(repo)) and is_remote_url(repo):
        where = f"{scp['host'].lower()}/{scp['path'].lstrip('/')}"
    else:
        where = repo
    where = where.rstrip("/")
    return where.removesuffix(".git").rstrip("/") or where
