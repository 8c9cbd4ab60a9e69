"""Images a VM boots from, pulled by the host: registries (``registry``), checked by digest."""
