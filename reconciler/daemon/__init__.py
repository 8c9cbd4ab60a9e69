"""Daemon: the long-running reconciler.

``scheduler`` (pure: which triggers are due, back-off, how long to sleep), ``triggers``
(the loop's wake-ups and the filter of its own libvirt events), ``listeners`` (refs
watcher, HTTP), ``service`` (the loop: one reconcile at a time, state out), ``runner``
(one host's two loops: convergence to a new revision, enforcement of the last applied
one), ``books`` (what is kept of a host between reconciles), ``statefile`` (the state
directory: its lock, ``state.json`` written and retried), ``record`` (what
state.json, /healthz and the status line say), ``http``/``health``/``metrics`` (the
listener), ``notify`` (systemd), ``rollback`` (ancestry checks), ``memory`` (the
process's allocator), ``reload`` (SIGHUP), ``early`` (signals caught from the first
instruction), ``main`` (the process: signals). The configuration file and a host's plan
policy are read in ``reconciler.config``.

The daemon reads time only from the clock it is given (``reconciler.context.Clock``:
``main`` passes the system's, tests one they advance by hand).
"""
