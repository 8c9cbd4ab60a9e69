"""The host configuration file: how KubeVirt concepts map onto one libvirt host.

Input: the bytes of a YAML file (``load_host_config``) or an already parsed mapping,
e.g. the ``host:`` section of a daemon config (``host_config_from_obj``).
Output: a frozen ``HostConfig`` (``settings.host``). Pure: it never opens files or looks at the host;
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


def host_config_from_obj(obj: Any, path: str, resolve: Callable[[str], str] | None = None) -> HostConfig:
    """Validate a parsed mapping (e.g. a daemon config's ``host:`` section); ``resolve``
    (``os.path.realpath`` on the host) checks where each allowed directory really is."""
    r = ConfigReader(path)
    if obj is None:
        return HostConfig()
    top = r.mapping(obj, "host config", _TOP)
    kw: dict[str, Any] = {}
    if (v := r.string(top, "name", "host")) is not None:
        if not v:
            raise r.fail("name: must not be empty", top, "name")
        kw["name"] = v
    if (b := r.boolean(top, "claimUnselected", "host")) is not None:
        kw["claim_unselected"] = b
    if "allowedDirectories" in top:
        dirs = top["allowedDirectories"]
        if not isinstance(dirs, list) or not dirs:
            raise r.fail(
                "allowedDirectories: expected a non-empty list of absolute paths", top, "allowedDirectories"
            )
        out = []
        for i, d in enumerate(dirs):
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
                where = (
                    "/, which would allow every file on the host" if tree == "/" else f"{real}, inside {tree}"
                )
                raise r.fail(f"allowedDirectories[{i}]: {d} resolves to {where}", dirs, i)
            out.append(d)
        kw["allowed_dirs"] = tuple(out)
    allowed = kw.get("allowed_dirs", _DEFAULTS.allowed_dirs)
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
    if (v := r.string(top, "storagePool", "host")) is not None:
        if not v:
            raise r.fail("storagePool: must not be empty", top, "storagePool")
        kw["storage_pool"] = v
    if (v := r.string(top, "storagePoolFormat", "host", IMAGE_FORMATS)) is not None:
        kw["storage_pool_format"] = v
    if "images" in top:
        imgs = r.mapping(top["images"], "images", tuple(top["images"] or ()), top, "images")
        images: dict[str, ImageSource] = {}
        for ref, spec in imgs.items():
            where = f"images[{ref!r}]"
            if isinstance(spec, str):
                node: Mapping[str, Any] = {"path": spec}
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
            images[str(ref)] = ImageSource(fpath, fmt)
        kw["images"] = images
    if "imageStore" in top:
        kw["image_store"] = read_image_store(r, top, lambda p: path_inside(p, allowed), allowed)
    if "hostDevices" in top:
        devs = r.mapping(
            top["hostDevices"], "hostDevices", tuple(top["hostDevices"] or ()), top, "hostDevices"
        )
        host_devices: dict[str, HostDevice] = {}
        pooled: dict[str, str] = {}  # mdev UUID -> the deviceName whose pool holds it
        for name, spec in devs.items():
            where = f"hostDevices[{name!r}]"
            node = r.mapping(spec, where, ("pci", "usb", "mdev"), devs, name)
            if len(node) != 1:
                raise r.fail(
                    f"{where}: give exactly one of pci (0000:65:00.0), usb (vendor:product) "
                    "or mdev ({type: nvidia-222, uuids: [...]})",
                    devs,
                    name,
                )
            kind = next(iter(node))
            if kind == "mdev":
                host_devices[str(name)] = _mdev_pool(r, node, f"{where}.mdev", str(name), pooled)
                continue
            address = r.string(node, kind, where) or ""
            parsed = parse_pci(address) if kind == "pci" else parse_usb(address)
            if parsed is None:
                form = (
                    "DDDD:BB:SS.F (lspci -D)" if kind == "pci" else "vendor:product (lsusb), e.g. 1d6b:0002"
                )
                raise r.fail(f"{where}.{kind}: {address!r} is not {form}", node, kind)
            host_devices[str(name)] = HostDevice(kind, parsed.text)
        kw["host_devices"] = host_devices
    if "networks" in top:
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
    if "firmware" in top:
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
    if (v := r.string(top, "factsFile", "host")) is not None:
        if not v or v.startswith("/") or ".." in v.split("/"):
            raise r.fail("factsFile: a path inside the repository (e.g. hosts/host1.json)", top, "factsFile")
        kw["facts_file"] = v
    if "registries" in top:
        kw["registries"] = registries_from_obj(r, top)
    if "defaults" in top:
        d = r.mapping(
            top["defaults"], "defaults", ("cpuModel", "graphics", "graphicsListen"), top, "defaults"
        )
        if (v := r.string(d, "cpuModel", "defaults")) is not None:
            if not v:
                raise r.fail("defaults.cpuModel: must not be empty", d, "cpuModel")
            kw["cpu_model"] = v
        if (v := r.string(d, "graphics", "defaults", GRAPHICS)) is not None:
            kw["graphics"] = v
        if (v := r.string(d, "graphicsListen", "defaults")) is not None:
            kw["graphics_listen"] = v
    return HostConfig(**kw)


def load_host_config(data: bytes, path: str, resolve: Callable[[str], str] | None = None) -> HostConfig:
    """Parse and validate a host configuration file (YAML)."""
    return host_config_from_obj(load_config_yaml(data, path), path, resolve)
