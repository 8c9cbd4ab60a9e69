"""Plan: desired and live domains paired into the changes one host needs.

``build`` pairs and orders them (create, update, restart, start, stop, delete, wait),
``power`` decides power actions from run strategies, ``guard`` keeps owners apart and
holds back large prunes, ``moves`` keeps a VM from running on two hosts, ``revision``
plans one revision for one host (errors alone when it has any), ``text`` words a plan,
``output`` turns it into data, ``planned`` holds one host's plan with what it was
computed against (``PlannedRevision``), ``saved`` writes and reads it as a file
(``plan --out``). Pure: the live side is read by the caller.
"""
