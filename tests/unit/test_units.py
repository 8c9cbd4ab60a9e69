"""The one reading of each unit grammar (``reconciler.model.units``).

Covers: Kubernetes quantities (binary and decimal suffixes, a decimal exponent, signs,
``1.``/``.5``, YAML integers and floats; the refused forms, ``1e3Ki`` among them, with
their error at file:line through render and through a preference's memory
requirement); canonical text; libvirt memory units as ``virScaleInteger`` reads them
(any case, ``KB`` = 1000, ``KiB`` = ``k`` = 1024, KiB rounded up as libvirt stores
them); sizes in words; durations (the union of the daemon's and the restart windows'
forms; NaN, infinity and negative numbers refused, in the config file at file:line).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.compare.essence import essence
from reconciler.config.daemon_file import load_config
from reconciler.errors import ConfigError
from reconciler.model import units
from reconciler.settings import windows

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo


@pytest.mark.parametrize(
    ("text", "amount", "fmt"),
    [
        ("2Gi", 2 * 1024**3, units.FORMAT_BINARY),
        ("1.5Gi", 3 * 512 * 1024**2, units.FORMAT_BINARY),
        ("512M", 512 * 10**6, units.FORMAT_DECIMAL),
        ("100m", Fraction(1, 10), units.FORMAT_DECIMAL),
        ("5n", Fraction(5, 10**9), units.FORMAT_DECIMAL),
        ("7u", Fraction(7, 10**6), units.FORMAT_DECIMAL),
        ("1k", 1000, units.FORMAT_DECIMAL),
        ("1E", 10**18, units.FORMAT_DECIMAL),  # exa, not an exponent
        ("1e3", 1000, units.FORMAT_EXPONENT),
        ("1.5E-3", Fraction(3, 2000), units.FORMAT_EXPONENT),
        ("+.5", Fraction(1, 2), units.FORMAT_DECIMAL),
        ("1.", 1, units.FORMAT_DECIMAL),
        ("-1Ki", -1024, units.FORMAT_BINARY),
        (" 64Mi ", 64 * 1024**2, units.FORMAT_BINARY),
        (1024, 1024, units.FORMAT_DECIMAL),
        (1.5, Fraction(3, 2), units.FORMAT_DECIMAL),
    ],
)
def test_quantities_kubernetes_reads(text: object, amount: Fraction | int, fmt: str) -> None:
    assert units.parse_quantity(text) == (amount, fmt)


@pytest.mark.parametrize(
    "text",
    ["1e3Ki", "2E3Mi", "1Kb", "1K", "1ki", "Gi", "", "1 Gi x", "1e", "1e1.5", "0x10", "--1", True, None, [1]],
)
def test_what_is_no_quantity(text: object) -> None:
    assert not units.is_quantity(text)
    with pytest.raises(units.QuantityError, match="not a quantity"):
        units.parse_quantity(text)


def test_an_exponent_with_a_suffix_says_why() -> None:
    with pytest.raises(units.QuantityError, match=r"'1e3Ki' \(an exponent and a suffix cannot be combined\)"):
        units.quantity_bytes("1e3Ki")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1e999999999", "an exponent beyond ±100"),
        ("1e-101", "an exponent beyond ±100"),
        ("9" * 5000, "too many digits"),
    ],
)
def test_a_hostile_quantity_is_refused_at_once(text: str, why: str) -> None:
    with pytest.raises(units.QuantityError, match=f"\\({why}\\)"):
        units.quantity_bytes(text)
    assert units.quantity_bytes("1e100") == 10**100  # refused later, by the limits of what it sizes


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_yaml_float_that_is_no_number_is_no_quantity(value: float) -> None:
    with pytest.raises(units.QuantityError, match="not a finite number"):
        units.parse_quantity(value)


def test_bytes_and_counts_round_up_and_are_never_negative() -> None:
    assert units.quantity_bytes("1.5Ki") == 1536
    assert units.quantity_bytes("1500m") == 2
    assert units.quantity_count("100m") == 1
    assert units.quantity_ceil("-1500m") == -1
    with pytest.raises(units.QuantityError, match="negative"):
        units.quantity_bytes("-1Mi")


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("2048Mi", "2Gi"),
        ("1.5Gi", "1536Mi"),
        ("1.5", "1500m"),
        ("1000k", "1M"),
        ("1e3", "1e3"),
        ("0.1m", "100u"),
    ],
)
def test_canonical_text_as_kubernetes_prints_it(text: str, canonical: str) -> None:
    assert units.normalized(text) == canonical


@pytest.mark.parametrize(
    ("value", "unit", "kib"),
    [
        ("4", "GiB", 4 * 1024**2),
        ("4", "g", 4 * 1024**2),
        ("4", "G", 4 * 1024**2),
        ("4", "GB", 4 * 10**9 // 1024),
        ("2048", None, 2048),
        ("2048", "KiB", 2048),
        ("2048", "k", 2048),
        ("1", "KB", 1),  # 1000 bytes: libvirt keeps a whole KiB
        ("1000000000", "b", 976563),  # `1G` of a VM: rounded up, as libvirt reads it back
        ("1048576", "bytes", 1024),
        ("1", "TiB", 1024**3),
        ("1", "pib", 1024**4),
        ("1", "EB", 10**18 // 1024),
    ],
)
def test_libvirt_memory_units(value: str, unit: str | None, kib: int) -> None:
    assert units.memory_kib(value, unit) == kib


@pytest.mark.parametrize(("value", "unit"), [("1", "KiBi"), ("1", "x"), ("1.5", "KiB"), ("-1", "KiB")])
def test_what_libvirt_does_not_read_as_a_size(value: str, unit: str) -> None:
    with pytest.raises(ValueError, match=r"memory unit|size"):
        units.memory_kib(value, unit)


def test_the_essence_reads_a_byte_size_as_libvirt_stores_it() -> None:
    """A VM of ``1G`` (10^9 bytes) is rendered in bytes and read back by libvirt as
    976563 KiB: the essences agree, so the plan stays empty."""
    desired = essence("<domain><memory unit='b'>1000000000</memory></domain>")
    live = essence("<domain><memory unit='KiB'>976563</memory></domain>")
    assert desired["memory"] == live["memory"] == "976563"


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0"), (512, "512"), (1024, "1Ki"), (3 * 1024**2, "3Mi"), (2 * 1024**4, "2Ti")]
)
def test_sizes_in_words(n: int, text: str) -> None:
    assert units.format_bytes(n) == text


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("1.5h", 5400.0),
        (" 90 ", 90.0),
        ("2 h", 7200.0),
        (45, 45.0),
        (0.25, 0.25),
        ("0", 0.0),
    ],
)
def test_durations(value: object, seconds: float) -> None:
    assert units.parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["soon", "1w", "-5m", "5 minutes", "", math.nan, math.inf, -1, True, None])
def test_what_is_no_duration(value: object) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        units.parse_duration(value)


def test_durations_of_both_readers_are_one_grammar(tmp_path: Path) -> None:
    """A restart window takes ``ms``, a daemon interval ``d``: the same reader."""
    assert windows.window("0 2 * * *", "1d").duration_s == 86400
    assert windows.parse_annotation("0 2 * * *; 90000ms").duration_s == 90
    cfg = tmp_path / "c.yaml"
    cfg.write_text("source: {repo: /r}\nintervals:\n  resync: 1d\n  fetch: 1500ms\n")
    c = load_config(str(cfg))
    assert (c.resync_interval_s, c.fetch_interval_s) == (86400, 1.5)
    assert units.format_duration(86400) == "1d"
    assert units.format_duration(90) == "90s"


@pytest.mark.parametrize("value", [".nan", ".inf", "-5", "0", "0s"])
def test_a_duration_that_is_no_positive_number_is_refused_at_its_line(tmp_path: Path, value: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"source: {{repo: /r}}\nintervals:\n  fetch: {value}\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:3:10: intervals\.fetch: .* is not a positive duration"):
        load_config(str(cfg))


@pytest.mark.parametrize("value", [math.nan, math.inf, -5, 0, "0s", "-1h"])
def test_a_restart_window_of_no_positive_duration_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="not a positive duration"):
        windows.window("0 2 * * *", value)  # type: ignore[arg-type]


VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Halted
{preference}  template:
    spec:
      domain:
        memory:
          guest: {guest}
        devices: {{}}
"""
PREFERENCE = """\
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachinePreference
metadata:
  name: small
spec:
  requirements:
    memory:
      guest: {need}
"""


@pytest.mark.parametrize(
    ("preference", "guest", "need", "where"),
    [
        ("", "1e3Ki", "", "vms/web.yaml:11:11: "),  # render reads the VM's memory
        (
            "  preference: {name: small, kind: VirtualMachinePreference}\n",
            "1e3Ki",
            "1Mi",
            "vms/web.yaml:12:11: ",
        ),  # the requirement check
        (
            "  preference: {name: small, kind: VirtualMachinePreference}\n",
            "1Gi",
            "1e3Ki",
            "vms/web.yaml:7:3: ",
        ),  # the preference's own
    ],
)
def test_a_refused_quantity_names_its_file_and_line(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str], preference: str, guest: str, need: str, where: str
) -> None:
    text = VM.format(preference=preference, guest=guest) + (PREFERENCE.format(need=need) if need else "")
    git_repo.write("vms/web.yaml", text)
    git_repo.commit()
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    out = capsys.readouterr()
    err = out.out + out.err
    assert where in err, err
    assert "not a quantity: '1e3Ki' (an exponent and a suffix cannot be combined)" in err, err
