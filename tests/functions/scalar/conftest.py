"""Fixture for the scalar-layer tests: DuckDB over the same table, as the oracle."""

from __future__ import annotations

import pytest

from tests.functions.scalar.scalar_table import TABLE

duckdb = pytest.importorskip("duckdb")


@pytest.fixture(scope="session")
def con():
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    connection.register("t", TABLE)
    return connection
