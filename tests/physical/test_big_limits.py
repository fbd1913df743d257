"""Over a 10M-row generated Parquet source, ``LIMIT 10`` and ``ORDER BY x LIMIT 10`` read only
what they must (issue 4, item 10): the scan metrics say how many rows and row groups."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps

ROWS, GROUP = 10_000_000, 1_000_000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """10 row groups of 1M rows; ``x`` ascends with ties (every value 4 times), ``y`` is
    random."""
    x = np.arange(ROWS) // 4
    y = np.random.default_rng(10).integers(0, 1 << 30, ROWS)
    path = tmp_path_factory.mktemp("big") / "big.parquet"
    pq.write_table(pa.table({"x": x, "y": y}), path, row_group_size=GROUP)
    return str(path)


def _metric(text: str, name: str) -> int:
    return sum(int(v) for v in re.findall(rf"\b{name}=(\d+)", text))


def _scan(text: str) -> str:
    return next(line for line in text.splitlines() if "DataSourceExec" in line)


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_limit_reads_ten_rows_per_partition(big, partitions):
    session = ps.Session(target_partitions=partitions)
    session.register_parquet("big", big)
    run = session.sql("SELECT * FROM big LIMIT 10").execute()
    assert run.result.num_rows == 10
    scan = _scan(run.explain_analyze())
    assert "limit=10" in scan
    assert _metric(scan, "rows_read") <= 10 * partitions
    assert _metric(scan, "units_read") <= partitions


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_top_k_reads_only_the_row_groups_that_can_hold_the_top_rows(big, partitions):
    session = ps.Session(target_partitions=partitions)
    session.register_parquet("big", big)
    sql = "SELECT * FROM big ORDER BY x, y LIMIT 10"
    run = session.sql(sql).execute()
    expected = duckdb.sql(sql.replace("FROM big", f"FROM read_parquet('{big}')")).fetchall()
    assert [tuple(r.values()) for r in run.result.to_pylist()] == expected
    scan = _scan(run.explain_analyze())
    # each partition reads (part of) its first row group; once a top-k threshold is known,
    # the partitions' other row groups are skipped by their statistics and the rest of the
    # current one is dropped in the scan (rows_read counts what passes)
    assert _metric(scan, "units_read") <= partitions
    assert _metric(scan, "units_pruned_dynamic") >= 10 - partitions
    if partitions == 1:
        assert _metric(scan, "rows_read") <= 3 * 8192
    assert _metric(scan, "rows_read") + _metric(scan, "rows_skipped_dynamic") <= \
        partitions * GROUP
