"""SOPS-encrypted files, read as Flux's kustomize-controller reads them, and written as
``sops`` writes them.

Input: a file a build reads (its bytes, or its parsed documents), its repository path,
and ``Keys``: the host's age identities (and a PGP decrypter) that the CLI or the daemon
loaded, or ``SEALED`` (no keys: every encrypted value is replaced by a stand-in derived
from its ciphertext, so a change can be reviewed without the keys). Output: the
documents or bytes in clear, the file's ``sops`` metadata stripped and its MAC verified
(over every value in order, as ``sops`` computes it); ``ManifestError`` at the file's
line for a file that does not decrypt or verify. ``encrypt_file`` writes YAML, dotenv,
JSON and binary files ``sops`` itself decrypts.

Formats (``sops`` 3): YAML and JSON keep their structure, each value an
``ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`` and the metadata under a top-level
``sops`` key; dotenv flattens the metadata into ``sops_…`` keys; binary is the JSON
envelope ``{"data": …, "sops": …}``. The data key is opened by one of the file's age
recipients (or PGP, through the caller's decrypter); one key group only (no Shamir).

The modules, each over the ones before it:
- ``sops.keys``: the key material (``Keys``, ``SEALED``) and the opening of a file's
  data key by its age or PGP recipients;
- ``sops.values``: one encrypted value (its format, its types, AES-GCM), which values a
  file encrypts, the stand-in of a sealed value, and the walk over a file's values
  that opens them and verifies the MAC;
- ``sops.files``: the files opened: parsed YAML and JSON documents, and whole files
  (YAML text, JSON, dotenv, binary) by their format;
- ``sops.sealing``: the files sealed (``encrypt_file``, what ``reconciler encrypt``
  writes).

This module holds ``Problem``, what each of them raises for a file that does not open.

Pure given the key material: never reads the environment, a key file, gpg's keyring
or the clock (``encrypt_file`` takes the time); ``pyrage`` (age) is imported in
``sops.keys`` and ``cryptography`` (AES-GCM) in ``sops.values``, nowhere else. No
message holds a value, in clear or encrypted: errors name the file, the line and the
field.
"""

from __future__ import annotations


class Problem(Exception):
    """One thing wrong with an encrypted file: a message (never a value) and where."""

    def __init__(self, message: str, field: tuple[str | int, ...] = (), doc: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.doc = doc
