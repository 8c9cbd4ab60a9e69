"""Frozen records passed between the pipeline stages.

Input: nothing. Output: types. Pure. Bodies of Kubernetes-style objects stay plain
``dict``/``list`` trees (as parsed); by convention nobody mutates a tree they did not
create: a stage that changes one returns a deep copy.

Names follow the state of the data: *raw* (as parsed), *expanded*, *rendered*,
*live* (as libvirt returns it), *essence* (after normalization). A VM's identity is a
``VMKey`` (``model.keys``) and an error or warning a ``Problem`` (``model.problems``),
both re-exported here: the expanded VM, the rendered domain, the change, the apply
result and the status row carry the key, and stages pair by it. The plan's records
(``Change``, ``Plan``, ``Action``, ...) are in ``model.changes``; what applying did and
the status (``ApplyResult``, ``VMStatus``, ``ReconcileStatus``, ``Reason``) in
``model.results``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.model.health import NO_PROBES, Probes
from reconciler.model.keys import DEFAULT_NAMESPACE
from reconciler.model.keys import VMKey as VMKey
from reconciler.model.packed import cold_field, made_sizes, pack_domain, unpack_xml
from reconciler.model.problems import Problem as Problem  # noqa: TC001 (re-exported)
from reconciler.model.problems import Severity as Severity
from reconciler.model.rollout import PaceGroup as PaceGroup  # noqa: TC001 (read back by saved plans)
from reconciler.model.secretdata import NO_SECRETS, SecretData
from reconciler.model.trees import AtRest, lazy_tree
from reconciler.records import dataclass

# A Kubernetes-style object as parsed: plain dicts, lists and scalars.
Obj = dict[str, Any]
FieldPath = tuple[str | int, ...]

NAMESPACED_DEFAULT = DEFAULT_NAMESPACE


def format_path(path: FieldPath) -> str:
    """``("spec", "disks", 0, "name")`` -> ``spec.disks[0].name``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def parse_path(text: str) -> FieldPath:
    """``spec.template.spec.volumes[0].hostDisk.path`` -> ``("spec", ..., 0, "hostDisk", "path")``:
    the inverse of ``format_path``, the one syntax of a VM field in errors and reports;
    a map key with dots in brackets (``annotations[kubevirt.io/x]``) is one part."""
    out: list[str | int] = []
    # A key in brackets (``annotations[reconciler.kubevirt.io/adopt]``) may hold dots.
    for part in re.findall(r"[^.\[\]]+|\[[^\]]*\]", text):
        if part.startswith("["):
            key = part[1:-1]
            out.append(int(key) if key.isdigit() else key)
        else:
            out.append(part)
    return tuple(out)


class FileView(Protocol):
    """Read-only view of one snapshot of a repository (a git tree or a directory).

    Paths are POSIX, relative to the repository root, without a leading ``./``;
    ``""`` is the root. Implementations refuse anything outside the root.
    """

    def read(self, path: str) -> bytes: ...
    def exists(self, path: str) -> bool: ...
    def is_dir(self, path: str) -> bool: ...
    def listdir(self, path: str) -> list[str]: ...
    def blob_id(self, path: str) -> str | None:
        """A content id (git blob sha) usable as a cache key, or None."""
        ...


@dataclass(frozen=True, slots=True)
class Manifest(AtRest):
    """One parsed YAML document and where it came from (for error messages). Its tree
    may rest packed between a daemon's builds (``model.trees``)."""

    obj: Obj
    path: str  # file relative to the repository root ("" when built in memory)
    line: int = 0  # 1-based line of the document start; 0 when unknown
    # A Secret read from SOPS files without the keys: its encrypted values are
    # stand-ins derived from their ciphertext, and it is worded "(encrypted)".
    sealed: bool = False
    # Fields an overlay set (a patch, a replacement, a generated name): (field path, file,
    # line; 0 for the field's own line in that file), latest last. ``set_at`` reads it.
    set_by: tuple[tuple[FieldPath, str, int], ...] = field(default=(), compare=False, repr=False)
    # (group, version, kind, namespace, name) as read from ``obj`` (the overlay build's
    # id of the object, shared with its record), so that a resting tree is not unpacked
    # to be indexed; None: read from ``obj`` when asked.
    ident: tuple[str, str, str, str, str] | None = field(default=None, compare=False, repr=False)

    @property
    def kind(self) -> str:
        ident = self.ident
        return ident[2] if ident is not None else str(self.obj.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion") or "")

    @property
    def group(self) -> str:
        if self.ident is not None:
            return self.ident[0]
        av = self.api_version
        return av.split("/", 1)[0] if "/" in av else ""

    @property
    def metadata(self) -> Obj:
        md = self.obj.get("metadata")
        return md if isinstance(md, dict) else {}

    @property
    def name(self) -> str:
        ident = self.ident
        return ident[4] if ident is not None else str(self.metadata.get("name") or "")

    @property
    def namespace(self) -> str:
        ident = self.ident
        return ident[3] if ident is not None else str(self.metadata.get("namespace") or "")

    def set_at(self, path: FieldPath) -> tuple[str, int] | None:
        """Where an overlay set the field at ``path`` (or a field inside it, or the subtree
        holding it): (file, line; 0 for the field's own line in that file), the latest;
        ``None`` when the field is as this document's file has it."""
        n = len(path)
        for p, file, line in reversed(self.set_by):
            if p[:n] == path or path[: len(p)] == p:
                return file, line
        return None

    def __repr__(self) -> str:
        """A Secret shows its name and keys, never its values (a record printed by
        mistake, in a log or a test's failure, holds none)."""
        if self.kind != "Secret":
            return (
                f"Manifest(obj={self.obj!r}, path={self.path!r}, line={self.line!r}, sealed={self.sealed!r})"
            )
        at = f"{self.path!r}"[1:-1] + (f":{self.line}" if self.line else "")  # control characters escaped
        return f"Manifest(Secret {self.name!r} {secret_keys(self.obj)}; values redacted, at {at})"


lazy_tree(Manifest)


def secret_keys(obj: Obj) -> str:
    """``data: [k1, k2], stringData: [k3]``: what a Secret holds, by key only."""
    parts = []
    for name in ("data", "stringData"):
        block = obj.get(name)
        keys = sorted(str(k) for k in block) if isinstance(block, dict) else []
        parts.append(f"{name}: [{', '.join(keys)}]")
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class SourceSnapshot:
    """The tree of one commit, read through GitPython (never the work tree)."""

    repo: str  # repository location (path or URL)
    ref: str  # what was asked for (HEAD, main, a sha)
    commit: str  # full sha
    files: FileView
    message: str = ""
    committed_at: float = 0.0  # epoch seconds
    tree: str = ""  # sha of the commit's root tree: commits with one tree build alike


@dataclass(frozen=True, slots=True)
class RevisionInfo:
    """A captured instancetype / preference: which object, which content."""

    kind: str
    name: str
    namespace: str = ""
    hash: str = ""  # sha256 of ``data`` (expand/revision.py: apiVersion, kind, name, namespace, spec)
    commit: str = ""  # commit it was captured from
    data: str = ""  # canonical JSON of the captured object, so it can be replayed when pinned


@dataclass(frozen=True, slots=True)
class UnreadRevision(RevisionInfo):
    """A ``revisionName: git:<commit>`` pin that could not be read: the commit is unknown,
    does not build, or lacks the object. ``cause`` says which; the expansion reports it
    as the VM's one error, at its ``revisionName``."""

    cause: str = ""


NO_KEY = VMKey("", "")  # a record made without its key (it derives the key itself)


@dataclass(frozen=True, slots=True)
class ExpandedVM:
    """A VirtualMachine with instancetype, preference, presets and defaults applied."""

    vm: Obj  # the whole VirtualMachine; spec.template is expanded
    source: Manifest  # the raw document it came from
    instancetype: RevisionInfo | None = None
    preference: RevisionInfo | None = None
    presets: tuple[str, ...] = ()
    warnings: tuple[Problem, ...] = ()  # preset conflicts, ignored fields, ...
    # Repository revisions that differ from the pinned ones used above (not applied).
    newer_revisions: tuple[RevisionInfo, ...] = ()
    # The ConfigMaps of the VM's namespace its volumes name (configMap, sysprep), as the
    # repository holds them: (name, ((key, value, binary), ...)); binary values in base64.
    config_maps: tuple[tuple[str, tuple[tuple[str, str, bool], ...]], ...] = ()
    # The Secrets of the VM's namespace it names (secret / sysprep volumes, cloud-init
    # secret references, accessCredentials) that the build produced, values redacted.
    secrets: SecretData = field(default=NO_SECRETS, repr=False, compare=False)
    # Names the VM refers to that the build holds only with a generator's hash suffix:
    # (kind, name referred to, generated name), for the error that explains it.
    hashed_names: tuple[tuple[str, str, str], ...] = ()
    # The VM's identity: the key the catalog made, carried by expansion; when none is
    # given (a record made by hand), the key of its own metadata.
    key: VMKey = field(default=NO_KEY, compare=False)

    def __post_init__(self) -> None:
        if self.key is NO_KEY:
            meta = self.vm["metadata"]
            object.__setattr__(self, "key", VMKey(str(meta.get("namespace") or ""), str(meta["name"])))

    @property
    def name(self) -> str:
        return str(self.vm["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.vm["metadata"].get("namespace") or NAMESPACED_DEFAULT)

    @property
    def subject(self) -> str:
        return self.key.subject


class RunStrategy(enum.StrEnum):
    ALWAYS = "Always"
    RERUN_ON_FAILURE = "RerunOnFailure"
    ONCE = "Once"
    MANUAL = "Manual"
    HALTED = "Halted"


class Rollout(enum.StrEnum):
    STAGE = "Stage"
    RESTART = "Restart"


@dataclass(frozen=True, slots=True)
class VolumeSpec:
    """A host resource that apply must provision before defining the domain."""

    kind: str  # "file" | "pool-volume" | "overlay" | "cloudinit-iso" | "nvram"
    path: str  # target path (or volume name for pool volumes)
    capacity: int = 0  # bytes
    format: str = "qcow2"
    backing: str = ""  # backing image for overlays / clones
    backing_format: str = ""  # format of ``backing`` ("qcow2" | "raw"); never probed
    image: str = ""  # the image reference ``backing`` stands for, as the VM writes it
    digest: str = ""  # "sha256:..." the host resolved ``image`` to ("" = a local file, or not resolved)
    clone: str = ""  # pool volumes: the volume of the same pool this one is a copy of (DataVolume source.pvc)
    pool: str = ""
    content: bytes = b""  # a generated ISO's payload (names and digests of Secrets, no value)
    ephemeral: bool = False  # recreated per cold boot, removed on prune
    must_exist: bool = False  # hostDisk type Disk: error if missing
    # The build's Secrets the payload names (read by the ISO builder; the digest in
    # ``content`` stands for them everywhere else).
    secrets: SecretData = field(default=NO_SECRETS, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ConfigDigest:
    """What a generated ISO of a domain is made of, for the plan: the volume, the
    objects it draws on in words (``secret default/db-creds``; names only) and the
    digest of its payload. A changed digest is a (restart-class) change of the VM."""

    volume: str
    label: str
    digest: str


@dataclass(frozen=True, slots=True)
class RestartWindow:
    """When restart-class changes may restart a running VM (see settings/windows.py)."""

    schedule: str  # cron: minute hour day month weekday
    duration_s: float
    time_zone: str = "UTC"


@dataclass(frozen=True, slots=True)
class CpuNeed:
    """Host CPUs a VM must have to itself (``dedicatedCpuPlacement``), placed per host."""

    vcpus: int
    emulator: bool = False  # isolateEmulatorThread: one more CPU, for QEMU's own threads
    realtime: tuple[int, ...] = ()  # vCPUs scheduled FIFO (realtime, its mask)
    numa: bool = False  # numa.guestMappingPassthrough: guest cells follow the host's

    @property
    def count(self) -> int:
        return self.vcpus + (1 if self.emulator else 0)


@dataclass(frozen=True, slots=True)
class RenderedDomain:
    """What one VM needs on a libvirt host: domain XML plus resources to provision."""

    key: VMKey
    uuid: str
    # The deterministic domain XML, without the ownership metadata element: as the renderer
    # wrote it, or packed (``model.packed``) where it is kept long (``packed``); read as ``xml``
    xml_data: str | bytes
    spec_hash: str  # sha256 of xml and the generated ISOs' digests (render.xml.spec_hash)
    run_strategy: RunStrategy
    source_path: str  # file of the VM in the repository
    volumes: tuple[VolumeSpec, ...] = ()
    rollout: Rollout | None = None  # None: host default
    adopt: bool = False
    prune: bool = True  # reconciler.kubevirt.io/prune: "false" -> False
    grace_period_s: int = 180
    hostname: str = ""  # nodeSelector kubernetes.io/hostname, "" if unselected
    revisions: tuple[RevisionInfo, ...] = ()
    presets: tuple[str, ...] = ()
    warnings: tuple[Problem, ...] = ()
    macs: tuple[tuple[str, str], ...] = ()  # (MAC address, field path) of each interface
    host_devices: tuple[tuple[str, str], ...] = ()  # ("pci 0000:65:00.0", field path) passed through
    restart_windows: tuple[RestartWindow, ...] = ()  # the VM's annotation (replaces the policy's)
    restart_now: bool = False  # annotation value "now": restart-class changes restart at once
    start_paused: bool = False  # spec.template.spec.startStrategy: Paused
    probes: Probes = NO_PROBES  # readinessProbe, livenessProbe (render.probes); not in the XML
    cpu_need: CpuNeed | None = None  # dedicatedCpuPlacement: host CPUs placed per host (render.cputune)
    # One (deviceName, field path) per mediated device, in the order of its <hostdev type="mdev">:
    # the instances are handed out per host from the host config's pool (render.mdev)
    mdev_needs: tuple[tuple[str, str], ...] = ()
    config: tuple[ConfigDigest, ...] = ()  # generated ISOs (cloud-init, configMap, secret, sysprep)
    # Essence paths the VM's pass-through (render.passthrough) wrote into the XML, and
    # those of rendered elements it omitted: the plan and the PR diff name them.
    passthrough: tuple[str, ...] = ()
    passthrough_omitted: tuple[str, ...] = ()
    # (MAC, interface name) of each MAC derived, not given: a domain defined with a MAC
    # derived otherwise (an earlier version, another owner) keeps it
    # (``compare.definition.keep_live_macs``)
    derived_macs: tuple[tuple[str, str], ...] = ()
    pace: PaceGroup | None = None  # paced restarts: its pool's or its annotation's group (None: the host's)
    name: str = field(init=False, repr=False, compare=False)  # the libvirt domain name, from ``key``
    # A packed record's (``packed``): what a plan reads of its volumes, and the Secrets they hold
    _ephemeral: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)
    _images: tuple[tuple[str, str], ...] = field(default=(), init=False, repr=False, compare=False)
    _sizes: int = field(default=0, init=False, repr=False, compare=False)
    _held: tuple[object, ...] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.key.domain)
        if self.probes is not NO_PROBES and self.probes == NO_PROBES:
            object.__setattr__(self, "probes", NO_PROBES)  # one object for every VM without probes

    if not TYPE_CHECKING:  # (type checkers see the fields themselves)

        def __getattr__(self, name: str) -> Any:
            """A field a packed record holds in its blob (``model.packed``): read from it."""
            return cold_field(self, name, VolumeSpec)

    @property
    def xml(self) -> str:
        """The domain XML (a packed one unpacked at each read: a reader reads it once)."""
        data = self.xml_data
        return data if isinstance(data, str) else unpack_xml(data)

    def packed(self, same: dict[object, object] | None = None) -> RenderedDomain:
        """This record packed: what a daemon keeps of every VM for good, its fields that a
        plan of an unchanged domain reads kept, the others (its XML, volumes, ...) in one
        blob, read back where read (``model.packed``); the same record once packed.
        ``same``: values other records packed with it hold, an equal one shared."""
        return self if self._held is not None else pack_domain(self, same if same is not None else {})

    @property
    def ephemeral_paths(self) -> tuple[str, ...]:
        """The paths of the volumes made anew per cold boot (and removed on prune)."""
        if self._held is not None:
            return self._ephemeral
        return tuple(v.path for v in self.volumes if v.ephemeral)

    @property
    def images(self) -> tuple[tuple[str, str], ...]:
        """(image reference, digest) of each volume made from an image."""
        return (
            self._images
            if self._held is not None
            else tuple((v.image, v.digest) for v in self.volumes if v.image)
        )

    def sizes_made(self, sizes: tuple[tuple[str, int], ...]) -> bool:
        """Whether ``sizes`` ((path, bytes) of disks as an ownership mark records them) are
        the sizes this domain asks of its disks made with a size (``model.packed.made_sizes``;
        a packed record compares hashes: any other answer is ``False``, then read whole)."""
        if self._held is not None:
            return hash(sizes) == self._sizes
        return sizes == made_sizes(self.volumes)

    @property
    def subject(self) -> str:
        return self.key.subject

    @property
    def sized_by_instancetype(self) -> bool:
        """Whether the VM takes its size from an instancetype (its count of vCPUs is then
        the instancetype's ``cpu.guest``)."""
        return any("Instancetype" in r.kind for r in self.revisions)

    def runs_on(self, host: str, claim_unselected: bool) -> bool:
        """The VM belongs to host ``host``: it selects it by ``kubernetes.io/hostname``, or
        selects none and the host claims those (``claimUnselected``)."""
        return self.hostname == host if self.hostname else claim_unselected


@dataclass(frozen=True, slots=True)
class OwnershipMark:
    """The reconciler's element in a domain's <metadata> (see ownership/inventory.py)."""

    commit: str
    path: str
    spec_hash: str
    revisions: tuple[RevisionInfo, ...] = ()
    presets: tuple[str, ...] = ()
    prune: bool = True
    run_strategy: str = ""
    ephemeral: tuple[str, ...] = ()  # artefact paths removed on prune
    grace_period_s: int = 0  # terminationGracePeriodSeconds, for a prune after the VM left git (0: unknown)
    # Run-strategy bookkeeping (written after a start; see plan/power.py):
    started: bool = False  # the reconciler has started this domain at least once (Once)
    last_start: float = 0.0  # epoch seconds of the reconciler's last start
    restarts: int = 0  # consecutive crash restarts (crash-loop back-off)
    unplugs: tuple[str, ...] = ()  # devices asked to unplug live that the guest may still hold
    refused: tuple[str, ...] = ()  # live operations libvirt refused: they wait for the next cold boot
    adopted_from: str = ""  # the owner this domain was adopted from ("unmanaged": it had no mark)
    released: bool = False  # its owner let it go (its VM left git, domain kept): adoptable again
    owner: str = ""  # who wrote the mark (see ownership/guard.py); "" = written before owners existed
    config: tuple[ConfigDigest, ...] = ()  # the generated ISOs' digests this definition was made with
    # (path, bytes) of each disk the reconciler creates with a size (hostDisk DiskOrCreate,
    # pool volumes), as first created: an existing disk is never resized, so a size git
    # asks later is compared with this one (the plan says it is not applied)
    volumes: tuple[tuple[str, int], ...] = ()
    # An action decided and not finished (``"restart"``): written with the definition
    # before the action starts and cleared by the start that ends it, so a daemon killed
    # in between resumes it (see plan/intents.py)
    intent: str = ""


class PowerState(enum.StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    SHUTOFF = "shutoff"
    CRASHED = "crashed"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class LiveDomain:
    """A libvirt domain as read from the hypervisor."""

    name: str
    uuid: str
    state: PowerState
    persistent_xml: str  # VIR_DOMAIN_XML_INACTIVE
    live_xml: str = ""  # current XML when running, else ""
    mark: OwnershipMark | None = None
    persistent: bool = True
    # Why the domain is in ``state`` (libvirt's state reason, lower case: "shutdown",
    # "crashed", "destroyed", "failed", "booted", ...); "" when unknown.
    state_reason: str = ""
    # The VM its name stands for: made once where the host is read (``VMKey.from_domain``),
    # else from ``name`` here.
    key: VMKey = field(default=NO_KEY, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.key is NO_KEY:
            object.__setattr__(self, "key", VMKey.from_domain(self.name))

    @property
    def active(self) -> bool:
        return self.state in (PowerState.RUNNING, PowerState.PAUSED)
