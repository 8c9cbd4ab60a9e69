"""What ``reconciler import`` and ``reconciler images`` say of their outcomes
(``wording/imported.py``, ``wording/images.py``), as they always printed it: a domain
imported (with and without adjustments) or left out, the import's summary, the store's
line, a file pruned or that would be."""

from __future__ import annotations

from reconciler.wording import images, imported


def test_an_import_in_words() -> None:
    assert imported.imported("web", "vms/web.yaml", ()) == "imported  web -> vms/web.yaml"
    assert imported.imported("web", "vms/web.yaml", ("a", "b")) == "imported  web -> vms/web.yaml (a; b)"
    assert imported.left_out("db") == "left out  db"
    assert imported.note("x") == "note: x"
    assert imported.summary(2, 1, 0) == "Import: 2 imported (1 adjusted), 0 left out."


def test_the_image_store_in_words() -> None:
    assert images.store_line(1, 10, 100, "/srv/images") == "1 image(s), 10 of 100 bytes in /srv/images"
    assert images.pruned("/srv/images/x", True) == "would remove /srv/images/x"
    assert images.pruned("/srv/images/x", False) == "removed /srv/images/x"
    assert images.pruned_count(2, True) == "2 image file(s) would remove"
    assert images.pruned_count(0, False) == "0 image file(s) removed"
