"""The host configuration file: how KubeVirt concepts map onto one libvirt host.

Input: the bytes of a YAML file (``load_host_config``) or an already parsed mapping,
e.g. the ``host:`` section of a daemon config (``host_config_from_obj``).
Output: a frozen ``HostConfig`` (``settings.host``), each section read by its reader
(``_SECTIONS``, in order: the first bad value is the one reported).
Pure: it never opens files or looks at the host;
paths are checked lexically (``provision`` re-checks them with symlinks resolved),
and ``allowedDirectories`` also with the ``resolve`` function the caller passes (the
CLI and the daemon pass ``os.path.realpath``): a directory that is, or resolves to,
``/`` or a system tree (``SYSTEM_TREES``: ``/proc``, ``/etc``, ...) is refused, so
``/proc/self/root`` or a symlink to ``/`` never allows every file. Unknown keys and bad values raise ``ConfigError(msg, path, line, col)``.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from reconciler.config.images import read_image_store
from reconciler.config.registries import registries_from_obj
from reconciler.manifests.config import ConfigReader, load_config_yaml
from reconciler.model.identifiers import is_mdev_type, parse_pci, parse_usb, parse_uuid
from reconciler.settings.cpuset import parse_cpuset
from reconciler.settings.host import (
    BINDING_EQUIVALENTS,
    DOMAIN_TYPES,
    GRAPHICS,
    IMAGE_FORMATS,
    NETWORK_KINDS,
    REVISION_POLICIES,
    ROLLOUTS,
    HostConfig,
    HostDevice,
    ImageSource,
    NetworkTarget,
    path_inside,
    system_tree,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

_DEFAULTS = HostConfig()


# ---------------------------------------------------------------------------
# Loading


_TOP = (
    "name",
    "claimUnselected",
    "allowedDirectories",
    "volumeDirectory",
    "secretsDirectory",
    "configMapsDirectory",
    "nvramDirectory",
    "storagePool",
    "storagePoolFormat",
    "images",
    "imageStore",
    "networks",
    "firmware",
    "domainType",
    "emulator",
    "defaults",
    "rollout",
    "instancetypeRevisions",
    "factsFile",
    "hostDevices",
    "dedicatedCpus",
    "registries",
)


def _network_target(
    r: ConfigReader, node: Any, where: str, parent: Any, pkey: Any, allow_user: bool
) -> NetworkTarget:
    kinds = NETWORK_KINDS if allow_user else ("network", "bridge", "direct")
    m = r.mapping(node, where, kinds, parent, pkey)
    if len(m) != 1:
        raise r.fail(f"{where}: give exactly one of {', '.join(kinds)}", parent, pkey)
    kind = next(iter(m))
    if kind == "user":
        if m[kind] not in (None, {}, True):
            raise r.fail(f"{where}.user: takes no settings (write `user: {{}}`)", m, kind)
        return NetworkTarget("user", "")
    name = r.string(m, kind, where)
    if not name:
        raise r.fail(f"{where}.{kind}: name must not be empty", m, kind)
    return NetworkTarget(kind, name)


def _binding_plugins(r: ConfigReader, nets: Any) -> dict[str, str]:
    """``networks.bindingPlugins: {NAME: bridge|passt|slirp|macvtap}``: what each network
    binding plugin registered on the KubeVirt side under NAME is on this host."""
    node = nets["bindingPlugins"]
    plugins = r.mapping(node, "networks.bindingPlugins", tuple(node or ()), nets, "bindingPlugins")
    out: dict[str, str] = {}
    for name, equivalent in plugins.items():
        if not name:
            raise r.fail("networks.bindingPlugins: a plugin name must not be empty", plugins, name)
        if equivalent not in BINDING_EQUIVALENTS:
            raise r.fail(
                f"networks.bindingPlugins[{name!r}]: {equivalent!r} is not one of "
                f"{', '.join(BINDING_EQUIVALENTS)}",
                plugins,
                name,
            )
        out[name] = str(equivalent)
    return out


def _mdev_pool(r: ConfigReader, parent: Any, where: str, name: str, pooled: dict[str, str]) -> HostDevice:
    """``mdev: {type: TYPE, uuids: [UUID, ...]}``: the mediated devices (created on the host,
    e.g. with ``mdevctl define --auto``) VMs asking for ``name`` may have, one VM each;
    ``type`` (optional) is checked against the host's facts."""
    node = r.mapping(parent["mdev"], where, ("type", "uuids"), parent, "mdev")
    mdev_type = r.string(node, "type", where) or ""
    if "type" in node and not is_mdev_type(mdev_type):
        raise r.fail(f"{where}.type: {mdev_type!r} is not an mdev type id (e.g. nvidia-222)", node, "type")
    uuids = node.get("uuids")
    if not isinstance(uuids, list) or not uuids:
        raise r.fail(
            f"{where}.uuids: a non-empty list of the mediated devices' UUIDs (mdevctl list)",
            node if "uuids" in node else parent,
            "uuids" if "uuids" in node else "mdev",
        )
    out: list[str] = []
    for i, given in enumerate(uuids):
        uuid = parse_uuid(given)
        if uuid is None:
            raise r.fail(f"{where}.uuids[{i}]: {given!r} is not a UUID", uuids, i)
        if uuid in pooled:
            other = "this pool" if pooled[uuid] == name else f"hostDevices[{pooled[uuid]!r}]"
            raise r.fail(f"{where}.uuids[{i}]: {uuid} is already listed in {other}", uuids, i)
        pooled[uuid] = name
        out.append(uuid)
    return HostDevice("mdev", mdev_type, tuple(out))


def _names(r: ConfigReader, top: Mapping[str, Any]) -> dict[str, Any]:
    """``name`` and ``claimUnselected``."""
    kw: dict[str, Any] = {}
    if (v := r.string(top, "name", "host")) is not None:
        if not v:
            raise r.fail("name: must not be empty", top, "name")
        kw["name"] = v
    if (b := r.boolean(top, "claimUnselected", "host")) is not None:
        kw["claim_unselected"] = b
    return kw


def _allowed_dir(r: ConfigReader, dirs: list[Any], i: int, resolve: Callable[[str], str] | None) -> str:
    """``allowedDirectories[i]``: absolute, normalized, and neither inside nor resolving to
    ``/`` or a system tree."""
    d = dirs[i]
    if isinstance(d, str) and d.startswith("/") and d.strip("/") == "":
        raise r.fail(f"allowedDirectories[{i}]: '/' would allow every file on the host", dirs, i)
    if not isinstance(d, str) or not d.startswith("/") or posixpath.normpath(d) != d.rstrip("/"):
        raise r.fail(f"allowedDirectories[{i}]: {d!r} must be an absolute, normalized path", dirs, i)
    d = d.rstrip("/")
    tree = system_tree(d)
    if tree is not None:
        raise r.fail(f"allowedDirectories[{i}]: {d} is inside {tree}, the host's own system", dirs, i)
    real = resolve(d) if resolve is not None else d
    tree = system_tree(real)
    if tree is not None:
        where = "/, which would allow every file on the host" if tree == "/" else f"{real}, inside {tree}"
        raise r.fail(f"allowedDirectories[{i}]: {d} resolves to {where}", dirs, i)
    return d


def _allowed_dirs(
    r: ConfigReader, top: Mapping[str, Any], resolve: Callable[[str], str] | None
) -> tuple[str, ...]:
    """``allowedDirectories``: a non-empty list of allowed directories."""
    dirs = top["allowedDirectories"]
    if not isinstance(dirs, list) or not dirs:
        raise r.fail(
            "allowedDirectories: expected a non-empty list of absolute paths", top, "allowedDirectories"
        )
    return tuple(_allowed_dir(r, dirs, i, resolve) for i in range(len(dirs)))


def _directories(r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """The volume, NVRAM, secrets and config-map directories; volumes inside ``allowed``."""
    kw: dict[str, Any] = {}
    for key, attr in (
        ("volumeDirectory", "volume_dir"),
        ("nvramDirectory", "nvram_dir"),
        ("secretsDirectory", "secrets_dir"),
        ("configMapsDirectory", "config_maps_dir"),
    ):
        if (p := r.abspath(top, key, "host")) is not None:
            kw[attr] = p
    vol_dir = kw.get("volume_dir", _DEFAULTS.volume_dir)
    if not path_inside(vol_dir + "/x", allowed):
        raise r.fail(
            f"volumeDirectory: {vol_dir} is not inside allowedDirectories ({', '.join(allowed)})",
            top,
            "volumeDirectory" if "volumeDirectory" in top else None,
        )
    return kw


def _storage_pool(r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """``storagePool`` and ``storagePoolFormat``."""
    kw: dict[str, Any] = {}
    if (v := r.string(top, "storagePool", "host")) is not None:
        if not v:
            raise r.fail("storagePool: must not be empty", top, "storagePool")
        kw["storage_pool"] = v
    if (v := r.string(top, "storagePoolFormat", "host", IMAGE_FORMATS)) is not None:
        kw["storage_pool_format"] = v
    return kw


def _image(r: ConfigReader, imgs: Mapping[str, Any], ref: Any, allowed: tuple[str, ...]) -> ImageSource:
    """``images[ref]``: a path (its format from its suffix) or ``{path, format}``, inside ``allowed``."""
    spec = imgs[ref]
    where = f"images[{ref!r}]"
    if isinstance(spec, str):
        fpath: str | None = spec
        fmt = "raw" if spec.endswith((".img", ".raw", ".iso")) else "qcow2"
    else:
        node = r.mapping(spec, where, ("path", "format"), imgs, ref)
        fpath = r.string(node, "path", where)
        fmt = r.string(node, "format", where, IMAGE_FORMATS) or (
            "raw" if (fpath or "").endswith((".img", ".raw", ".iso")) else "qcow2"
        )
    if not fpath or not path_inside(fpath, allowed):
        raise r.fail(
            f"{where}: path {fpath!r} is not inside allowedDirectories ({', '.join(allowed)})",
            imgs,
            ref,
        )
    return ImageSource(fpath, fmt)


def _images(r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """``images`` and ``imageStore``."""
    kw: dict[str, Any] = {}
    if "images" in top:
        imgs = r.mapping(top["images"], "images", tuple(top["images"] or ()), top, "images")
        kw["images"] = {str(ref): _image(r, imgs, ref, allowed) for ref in imgs}
    if "imageStore" in top:
        kw["image_store"] = read_image_store(r, top, lambda p: path_inside(p, allowed), allowed)
    return kw


def _host_device(r: ConfigReader, devs: Mapping[str, Any], name: Any, pooled: dict[str, str]) -> HostDevice:
    """``hostDevices[name]``: one of a PCI address, a USB vendor:product or an mdev pool."""
    where = f"hostDevices[{name!r}]"
    node = r.mapping(devs[name], where, ("pci", "usb", "mdev"), devs, name)
    if len(node) != 1:
        raise r.fail(
            f"{where}: give exactly one of pci (0000:65:00.0), usb (vendor:product) "
            "or mdev ({type: nvidia-222, uuids: [...]})",
            devs,
            name,
        )
    kind = next(iter(node))
    if kind == "mdev":
        return _mdev_pool(r, node, f"{where}.mdev", str(name), pooled)
    address = r.string(node, kind, where) or ""
    parsed = parse_pci(address) if kind == "pci" else parse_usb(address)
    if parsed is None:
        form = "DDDD:BB:SS.F (lspci -D)" if kind == "pci" else "vendor:product (lsusb), e.g. 1d6b:0002"
        raise r.fail(f"{where}.{kind}: {address!r} is not {form}", node, kind)
    return HostDevice(kind, parsed.text)


def _host_devices(r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """``hostDevices``: the devices VMs may be given, by deviceName."""
    if "hostDevices" not in top:
        return {}
    devs = r.mapping(top["hostDevices"], "hostDevices", tuple(top["hostDevices"] or ()), top, "hostDevices")
    pooled: dict[str, str] = {}  # mdev UUID -> the deviceName whose pool holds it
    return {"host_devices": {str(name): _host_device(r, devs, name, pooled) for name in devs}}


def _networks(r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """``networks``: the pod network, the multus networks and the binding plugins."""
    if "networks" not in top:
        return {}
    kw: dict[str, Any] = {}
    nets = r.mapping(top["networks"], "networks", ("pod", "multus", "bindingPlugins"), top, "networks")
    if "pod" in nets:
        kw["pod_network"] = _network_target(r, nets["pod"], "networks.pod", nets, "pod", allow_user=True)
    if "multus" in nets:
        mm = nets["multus"]
        r.mapping(mm, "networks.multus", tuple(mm or ()), nets, "multus")
        kw["networks"] = {
            str(k): _network_target(r, v, f"networks.multus[{k!r}]", mm, k, allow_user=False)
            for k, v in (mm or {}).items()
        }
    if "bindingPlugins" in nets:
        kw["binding_plugins"] = _binding_plugins(r, nets)
    return kw


def _firmware(r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """``firmware``: the OVMF code and variables files, plain and secure-boot."""
    if "firmware" not in top:
        return {}
    kw: dict[str, Any] = {}
    fw = r.mapping(
        top["firmware"],
        "firmware",
        ("efiCode", "efiVars", "secureBootCode", "secureBootVars"),
        top,
        "firmware",
    )
    for key, attr in (
        ("efiCode", "ovmf_code"),
        ("efiVars", "ovmf_vars"),
        ("secureBootCode", "ovmf_secure_code"),
        ("secureBootVars", "ovmf_secure_vars"),
    ):
        if (p := r.abspath(fw, key, "firmware")) is not None:
            kw[attr] = p
    return kw


def _hypervisor(r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """``domainType``, ``emulator``, ``rollout``, ``instancetypeRevisions`` and ``dedicatedCpus``."""
    kw: dict[str, Any] = {}
    if (v := r.string(top, "domainType", "host", DOMAIN_TYPES)) is not None:
        kw["domain_type"] = v
    if (p := r.abspath(top, "emulator", "host")) is not None:
        kw["emulator"] = p
    if (v := r.string(top, "rollout", "host", ROLLOUTS)) is not None:
        kw["rollout"] = v
    if (v := r.string(top, "instancetypeRevisions", "host", REVISION_POLICIES)) is not None:
        kw["instancetype_revisions"] = v
    if "dedicatedCpus" in top:
        text = top["dedicatedCpus"]
        if not isinstance(text, str):
            raise r.fail('host.dedicatedCpus: a cpuset such as "2-7,10"', top, "dedicatedCpus")
        try:
            kw["dedicated_cpus"] = parse_cpuset(text)
        except ValueError as err:
            raise r.fail(f"host.dedicatedCpus: {err}", top, "dedicatedCpus") from err
    return kw


def _facts_and_registries(
    r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]
) -> dict[str, Any]:
    """``factsFile`` (a path inside the repository) and ``registries``."""
    kw: dict[str, Any] = {}
    if (v := r.string(top, "factsFile", "host")) is not None:
        if not v or v.startswith("/") or ".." in v.split("/"):
            raise r.fail("factsFile: a path inside the repository (e.g. hosts/host1.json)", top, "factsFile")
        kw["facts_file"] = v
    if "registries" in top:
        kw["registries"] = registries_from_obj(r, top)
    return kw


def _defaults(r: ConfigReader, top: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """``defaults``: the CPU model and graphics VMs get when they name none."""
    if "defaults" not in top:
        return {}
    kw: dict[str, Any] = {}
    d = r.mapping(top["defaults"], "defaults", ("cpuModel", "graphics", "graphicsListen"), top, "defaults")
    if (v := r.string(d, "cpuModel", "defaults")) is not None:
        if not v:
            raise r.fail("defaults.cpuModel: must not be empty", d, "cpuModel")
        kw["cpu_model"] = v
    if (v := r.string(d, "graphics", "defaults", GRAPHICS)) is not None:
        kw["graphics"] = v
    if (v := r.string(d, "graphicsListen", "defaults")) is not None:
        kw["graphics_listen"] = v
    return kw


# The readers of the sections after ``allowedDirectories``, in the order they are checked
# (the first bad value is the one reported): each takes the reader, the top mapping and the
# allowed directories, and returns ``HostConfig`` keyword arguments.
_SECTIONS: tuple[Callable[[ConfigReader, Mapping[str, Any], tuple[str, ...]], dict[str, Any]], ...] = (
    _directories,
    _storage_pool,
    _images,
    _host_devices,
    _networks,
    _firmware,
    _hypervisor,
    _facts_and_registries,
    _defaults,
)


def host_config_from_obj(obj: Any, path: str, resolve: Callable[[str], str] | None = None) -> HostConfig:
    """Validate a parsed mapping (e.g. a daemon config's ``host:`` section); ``resolve``
    (``os.path.realpath`` on the host) checks where each allowed directory really is."""
    r = ConfigReader(path)
    if obj is None:
        return HostConfig()
    top = r.mapping(obj, "host config", _TOP)
    kw = _names(r, top)
    if "allowedDirectories" in top:
        kw["allowed_dirs"] = _allowed_dirs(r, top, resolve)
    allowed = kw.get("allowed_dirs", _DEFAULTS.allowed_dirs)
    for section in _SECTIONS:
        kw.update(section(r, top, allowed))
    return HostConfig(**kw)


def load_host_config(data: bytes, path: str, resolve: Callable[[str], str] | None = None) -> HostConfig:
    """Parse and validate a host configuration file (YAML)."""
    return host_config_from_obj(load_config_yaml(data, path), path, resolve)
