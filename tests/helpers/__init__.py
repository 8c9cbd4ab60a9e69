"""Helpers shared by the test suites: the one place a test module imports test code from.

A test module (``test_*.py``) or a ``conftest.py`` imports from ``tests.helpers`` and
never from another test module or conftest (``tests/unit/test_test_imports.py`` checks
it); the helpers import no test module either.
"""
