"""KubeVirt's admission rules for the machine: CPU and memory, firmware, run
strategies, instancetypes and preferences.

Input: nothing. Output: the rows of ``catalog.admission.RULES`` for these areas, one
tuple per area, each row citing its KubeVirt source file at the pinned commit
(``catalog.admission.KUBEVIRT_COMMIT``) and the stage of ours that enforces it. Pure
data: never reads files, checks nothing itself.
"""

from __future__ import annotations

from reconciler.catalog.rules import ADM, VMI, Ours, Rule, rendered_by

CPU_MEMORY_RULES: tuple[Rule, ...] = (
    # CPU, memory, NUMA
    Rule(
        "mandatory-memory",
        "cpu/memory",
        VMI,
        "no memory requested (guest, requests or hugepages)",
        Ours.SAME,
        "render/memory.py",
    ),
    Rule(
        "cpu-requests",
        "cpu/memory",
        VMI,
        "negative CPU requests/limits; requests above limits",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "memory-requests",
        "cpu/memory",
        VMI,
        "negative or sub-1M memory requests; requests above limits",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "guest-memory-limit",
        "cpu/memory",
        VMI,
        "guest memory above the memory limit (only with the Stage rollout)",
        Ours.SAME,
        "render/memory.py",
    ),
    Rule(
        "hugepages",
        "cpu/memory",
        VMI,
        "page size not a quantity, above the memory, or not dividing it",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "max-sockets",
        "cpu/memory",
        ADM + "vms-admitter.go",
        "sockets above maxSockets",
        Ours.SAME,
        "render/cpu.py",
    ),
    Rule(
        "max-guest",
        "cpu/memory",
        ADM + "vms-admitter.go",
        "guest memory above maxGuest",
        Ours.SAME,
        "render/memory.py",
    ),
    Rule(
        "numa",
        "cpu/memory",
        VMI,
        "NUMA passthrough without dedicated CPUs or hugepages",
        Ours.SAME,
        "render/cpu.py",
    ),
    Rule(
        "dedicated-cpu",
        "cpu/memory",
        VMI,
        "isolateEmulatorThread without dedicated CPUs; >2 threads; fractional or unequal CPU requests",
        Ours.SAME,
        "render/cpu.py, catalog/admission.py",
    ),
    Rule(
        "realtime",
        "cpu/memory",
        VMI,
        "realtime without dedicated CPUs or NUMA passthrough",
        Ours.SAME,
        "render/cpu.py, catalog/admission.py",
    ),
    Rule(
        "cpu-features",
        "cpu/memory",
        VMI,
        "CPU feature policy outside force/require/optional/disable/forbid",
        Ours.SAME,
        "render/cpu.py",
    ),
    Rule(
        "iothreads-policy",
        "cpu/memory",
        VMI,
        "unknown ioThreadsPolicy; supplementalPool without a positive count",
        Ours.SAME,
        rendered_by("disk"),
    ),
)

FIRMWARE_RULES: tuple[Rule, ...] = (
    # firmware
    Rule(
        "firmware",
        "firmware",
        VMI,
        "EFI and BIOS together; secure boot without SMM",
        Ours.SAME,
        "render/firmware.py",
    ),
    Rule(
        "firmware-acpi",
        "firmware",
        VMI,
        "ACPI SLIC/MSDM tables without a matching secret volume",
        Ours.UNSUPPORTED,
        "render/firmware.py: ACPI tables are not rendered yet",
    ),
    Rule(
        "kernel-boot",
        "firmware",
        VMI,
        "kernelArgs without kernel, paths not absolute",
        Ours.SAME,
        "render/firmware.py",
    ),
)

RUN_STRATEGY_RULES: tuple[Rule, ...] = (
    # run strategies
    Rule(
        "run-strategy",
        "run strategies",
        ADM + "vms-admitter.go",
        "running and runStrategy together; an unknown runStrategy",
        Ours.SAME,
        "catalog/admission.py, plan/power.py",
    ),
    Rule(
        "run-strategy-required",
        "run strategies",
        ADM + "vms-admitter.go",
        "neither running nor runStrategy",
        Ours.NA,
        "such a VM is Always here (DESIGN.md section 5); not flagged yet: a warning would reach every existing repository's output",
    ),
    Rule(
        "start-strategy",
        "run strategies",
        VMI,
        "an unknown startStrategy; Paused with a liveness probe",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "eviction-strategy",
        "run strategies",
        VMI,
        "an unknown evictionStrategy",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "vm-template",
        "run strategies",
        ADM + "vms-admitter.go",
        "a VM without template",
        Ours.SAME,
        "catalog/__init__.py",
    ),
    Rule(
        "pool",
        "run strategies",
        ADM + "vmpool-admitter.go",
        "no template; a selector not matching the template's labels",
        Ours.SAME,
        "catalog/pools.py (replicas)",
    ),
)

INSTANCETYPE_RULES: tuple[Rule, ...] = (
    # instancetypes and preferences
    Rule(
        "instancetype-conflict",
        "instancetypes",
        "instancetype/webhooks/vm/admitter.go",
        "a VM setting a field its instancetype sets",
        Ours.SAME,
        "expand/instancetype.py",
    ),
    Rule(
        "instancetype-missing",
        "instancetypes",
        "instancetype/webhooks/vm/admitter.go",
        "an instancetype or preference that does not exist",
        Ours.SAME,
        "expand/matcher.py",
    ),
    Rule(
        "preference-requirements",
        "instancetypes",
        "instancetype/webhooks/vm/admitter.go",
        "a VM below its preference's CPU or memory requirements",
        Ours.SAME,
        "expand/requirements.py",
    ),
    Rule(
        "preference-spread",
        "instancetypes",
        "instancetype/preference/validation/cpu.go",
        "a spread ratio that does not divide the vCPUs",
        Ours.SAME,
        "expand/topology.py",
    ),
)
