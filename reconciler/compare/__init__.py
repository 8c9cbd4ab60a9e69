"""Compare: a desired domain against a live one, with no host.

``essence`` reduces domain XML to comparable paths, ``changes`` diffs essences and
classes each change through one table (``LIVE_RULES``: live-updatable fields and the
operation that applies each), ``cache`` remembers comparisons a daemon already made,
``definition`` makes a domain's final definition (live addresses carried, ownership
mark) from the trees the comparison parsed, ``provenance`` says a change in the user's
words (the KubeVirt field, file:line).
"""
