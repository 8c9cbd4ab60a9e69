"""Configuration an operator gives a host, read from files into the records of
``settings/``, and the one resolver of a host's target and plan policy.

- ``host``: the host config file (networks, images, directories, devices) -> ``HostConfig``,
  with its sections ``images`` (the image store) and ``registries``;
- ``daemon``: the daemon's configuration -> ``DaemonConfig``; ``daemon_file`` reads its file;
- ``keys``, ``notify``: the decryption keys and the notification sinks it names;
- ``targets``: a ``DaemonConfig`` and one host entry -> ``HostTarget`` (URI, host config,
  plan policy), the one place plan, apply, diff and the daemon resolve it.
"""
