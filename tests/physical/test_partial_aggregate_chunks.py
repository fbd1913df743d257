"""A partial aggregate reduces its input in chunks bounded by bytes as well as rows: wide
rows (TPC-H Q1's, ~90 bytes) once held 1M rows, 92 MiB, per partition before reducing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import plansight as ps
from plansight.engine.physical.aggregates.aggregate import AggregateExec


def test_wide_rows_are_reduced_in_chunks_of_bounded_bytes():
    rows = 600_000
    rng = np.random.default_rng(7)
    groups = rng.integers(0, 5, rows)
    strings = pa.array([f"{i:0150d}" for i in rng.integers(0, 1 << 40, rows)])
    table = pa.table({"g": groups, "v": rng.random(rows), "s": strings})  # ~100 MB
    session = ps.Session(target_partitions=2)
    session.register("t", table)
    query = session.sql("SELECT g, max(s) AS top, count(*) AS n, sum(v) AS total "
                        "FROM t GROUP BY g ORDER BY g")
    result = query.to_arrow()
    expected = table.group_by("g").aggregate([("s", "max"), ("g", "count"), ("v", "sum")]) \
        .sort_by("g")
    assert result["g"].to_pylist() == expected["g"].to_pylist()
    assert result["top"].to_pylist() == expected["s_max"].to_pylist()
    assert result["n"].to_pylist() == expected["g_count"].to_pylist()
    assert pc.max(pc.abs(pc.subtract(result["total"], expected["v_sum"]))).as_py() < 1e-6
    # two partitions, each holding at most a chunk, the batch that crossed the bound and a
    # grant chunk; all of its ~50 MB per partition before
    assert AggregateExec.PARTIAL_CHUNK_BYTES <= 16 << 20
    assert query.context.memory_pool.peak < 2 * (24 << 20), query.context.memory_pool.peak
