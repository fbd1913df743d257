"""Window queries generated systematically, checked against DuckDB.

Every function x frame unit x bound pair x EXCLUDE x input shape x batch size. ROWS frames
order by (o, id) so that ties cannot make the answer engine-dependent; RANGE and GROUPS
frames order by ``o`` alone, so peers (ties, NULLs) are exercised.
"""

from __future__ import annotations

import pytest

from tests.differential.harness import check
from tests.windows.window_cases import QUERIES, TABLES


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("shape", ["mixed", "tiny_partitions"])
def test_window_matches_duckdb(sql, shape):
    check(sql, {"t": TABLES[shape]}, batch_size=7)


@pytest.mark.parametrize("sql", QUERIES[::7])
@pytest.mark.parametrize("shape", ["one_partition", "empty"])
@pytest.mark.parametrize("batch_size", [1, 3, 8192])
def test_window_shapes_and_batch_sizes(sql, shape, batch_size):
    check(sql, {"t": TABLES[shape]}, batch_size=batch_size)
