"""Fixtures the unit tests share."""

from tests.fixtures.scanner_files import many_workers  # noqa: F401 - a fixture, found here by pytest
