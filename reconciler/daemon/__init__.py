"""Daemon: the long-running reconciler.

``scheduler`` (pure: which triggers are due, back-off, how long to sleep), ``triggers``
(the loop's wake-ups and the filter of its own libvirt events), ``listeners`` (refs
watcher, HTTP), ``service`` (the loop: one reconcile at a time, state out), ``runner``
(one host's connection and bookkeeping), ``record`` (what state.json, /healthz and the
status line say), ``http``/``health``/``metrics`` (the listener), ``notify``
(systemd), ``rollback`` (ancestry checks), ``memory`` (the process's allocator),
``main`` (the process: signals, reload). The configuration file and a host's plan
policy are read in ``reconciler.config``.

The daemon reads time only from the clock it is given (``reconciler.context.Clock``:
``main`` passes the system's, tests one they advance by hand).
"""
