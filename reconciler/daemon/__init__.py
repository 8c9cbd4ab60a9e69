"""Daemon: the long-running reconciler.

``scheduler`` (pure: which triggers are due, back-off, how long to sleep), ``triggers``
(the loop's wake-ups and the filter of its own libvirt events), ``listeners`` (refs
watcher, HTTP), ``service``
(the loop: one reconcile at a time, state out), ``runner`` (one host's connection and
bookkeeping), ``settings`` (the config file), ``targets`` (a host's plan policy),
``http``/``health``/``metrics`` (the listener), ``notify`` (systemd), ``rollback``
(ancestry checks), ``main`` (the process: signals, reload).
"""
