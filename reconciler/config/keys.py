"""The host's SOPS keys: an age key file read (its mode checked), gpg for
PGP recipients, and where the CLI finds them (as ``sops`` does).

Input: the path of an age key file (the daemon's ``decryption.ageKeyFile``; mode 0600
or stricter, as the CLI's), or the environment for the CLI (``SOPS_AGE_KEY``, ``SOPS_AGE_KEY_FILE``, else
``$XDG_CONFIG_HOME/sops/age/keys.txt``; ``GNUPGHOME``). Output: ``manifests.sops.keys.Keys``,
or None when the environment names no key. Reads the key file and runs ``gpg`` (the
host's keyring) to open a PGP data key; never reads git, never prints key material: an
error names the file and the line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.errors import ConfigError, ManifestError
from reconciler.manifests.config import read_config_file
from reconciler.manifests.sops.keys import Keys

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

GPG_TIMEOUT_S = 30.0


def gpg_decrypter(home: str | None = None) -> Callable[[str], bytes] | None:
    """A function opening an armored PGP message with the host's keyring (``home``:
    its GNUPGHOME, else gpg's default), or None without gpg."""
    import shutil  # here: a command without keys starts without shutil and subprocess
    import subprocess

    gpg = shutil.which("gpg")
    if gpg is None:
        return None
    env = {**os.environ, **({"GNUPGHOME": home} if home else {})}

    def decrypt(armored: str) -> bytes:
        try:
            proc = subprocess.run(
                [gpg, "--batch", "--quiet", "--no-tty", "--decrypt"],
                input=armored.encode(),
                capture_output=True,
                timeout=GPG_TIMEOUT_S,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise OSError("gpg did not answer") from err
        if proc.returncode != 0:
            raise OSError("gpg cannot open it with this keyring")
        return proc.stdout

    return decrypt


def read_age_key_file(path: str, gnupg_home: str | None = None) -> Keys:
    """The identities of an age key file, which must be its owner's alone (mode 0600 or
    stricter): one rule for the daemon's ``decryption.ageKeyFile`` and the CLI's
    ``SOPS_AGE_KEY_FILE`` (or ``keys.txt``), as ssh refuses a key others can read."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as err:
        raise ConfigError(f"age key file {path}: {err.strerror}", path) from err
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"age key file {path}: not a regular file", path)
    if st.st_mode & 0o077:
        raise ConfigError(
            f"age key file {path}: mode {stat.S_IMODE(st.st_mode):04o} lets others read it: chmod 600 {path}",
            path,
        )
    try:
        text = read_config_file(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"age key file {path}: cannot be read as text", path) from err
    try:
        return Keys.from_age_keys(text, path, pgp=gpg_decrypter(gnupg_home))
    except ManifestError as err:
        raise ConfigError(err.message, path, err.line, err.column) from err


def keys_from_environment(environ: Mapping[str, str]) -> Keys | None:
    """The CLI's keys, found as ``sops`` finds them: ``SOPS_AGE_KEY`` (the identities
    themselves), ``SOPS_AGE_KEY_FILE``, else the user's ``sops/age/keys.txt``; gpg joins
    them for PGP recipients, or alone when ``GNUPGHOME`` is set. None: no key here."""
    home = environ.get("GNUPGHOME") or None
    if environ.get("SOPS_AGE_KEY"):
        try:
            return Keys.from_age_keys(environ["SOPS_AGE_KEY"], "SOPS_AGE_KEY", pgp=gpg_decrypter(home))
        except ManifestError as err:
            raise ConfigError(err.message, "SOPS_AGE_KEY", err.line, err.column) from err
    if environ.get("SOPS_AGE_KEY_FILE"):
        return read_age_key_file(environ["SOPS_AGE_KEY_FILE"], gnupg_home=home)
    config_home = environ.get("XDG_CONFIG_HOME") or (
        str(Path(environ["HOME"]) / ".config") if environ.get("HOME") else ""
    )
    default = Path(config_home) / "sops" / "age" / "keys.txt" if config_home else None
    if default is not None and default.is_file():
        return read_age_key_file(str(default), gnupg_home=home)
    if home:
        gpg = gpg_decrypter(home)
        if gpg is not None:
            return Keys(pgp=gpg)
    return None
