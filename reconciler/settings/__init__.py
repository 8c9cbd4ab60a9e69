"""Settings as records: what an operator configured, as the stages read it. Pure records
(and the pure checks of their values); the readers of files live in ``config/``.

- ``host``: the host config (networks, images, directories, devices) -> ``HostConfig``,
  with its parts ``images`` (the image store) and ``registries`` (how images are pulled);
- ``cpuset``: cpusets as Linux and libvirt write them;
- ``windows``: restart windows (cron schedule, duration, time zone), open or not at a time;
- ``policy``: a host's plan policy (``PlanPolicy``) and the other hosts' copies (``Elsewhere``);
- ``targets``: one host this process drives (``HostTarget``: URI, host config, plan policy).
"""
