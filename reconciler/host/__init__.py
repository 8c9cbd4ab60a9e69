"""Host: everything that touches a libvirt host.

``connection`` (the only import of libvirt), ``hypervisor`` (domains and facts),
``storage`` (pool volumes), ``events`` (lifecycle and connection events), ``provision``
(the files and volumes a domain needs), ``apply`` (a plan carried out, each planned
definition defined as it is) and ``state`` (the state file the daemon keeps next to
the host).
"""
