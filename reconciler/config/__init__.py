"""Configuration an operator gives a host: its host config, the daemon's config file,
restart windows, and the one resolver of a host's target and plan policy.

- ``host``: the host config (networks, images, directories, devices) -> ``HostConfig``;
- ``windows``: restart windows (cron schedule, duration, time zone);
- ``daemon``: the daemon's configuration file -> ``DaemonConfig``;
- ``targets``: a ``DaemonConfig`` and one host entry -> ``HostTarget`` (URI, host config,
  plan policy), the one place plan, apply, diff and the daemon resolve it.
"""
