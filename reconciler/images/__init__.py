"""The image store of a host and the sources that fill it (containerDisk, DataVolume).

Between the host and the pure core: resolution turns each image reference of a
revision into a ``Resolved`` record (digest, store path, format) before render, which
reads the map through the host config it is given and stays pure.
"""
