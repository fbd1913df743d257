"""Helpers of the distributed tests: TPC-H sessions, and cluster results against local ones
(the same rows, non-floats exactly and floats within a relative 1e-12: the only freedom a
different summation order leaves)."""

from __future__ import annotations

import math
import os

import pyarrow as pa

import plansight as ps

REL = 1e-12


def _rows(table: pa.Table) -> list[tuple]:
    rows = [tuple(row.values()) for row in table.to_pylist()]
    # floats last in the sort key: summation order may change their last bits only
    return sorted(rows, key=lambda row: (
        tuple("" if isinstance(v, float) else repr(v) for v in row),
        tuple((1, 0.0) if isinstance(v, float) and math.isnan(v) else
              (0, v if isinstance(v, float) else 0.0) for v in row)))


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= REL * max(abs(a), abs(b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def assert_equal_to_local(got: pa.Table, local: pa.Table, sql: str = "") -> None:
    assert got.schema.types == local.schema.types, (got.schema, local.schema, sql)
    assert got.num_rows == local.num_rows, (got.num_rows, local.num_rows, sql)
    for i, (a, b) in enumerate(zip(_rows(got), _rows(local))):
        assert _close(a, b), f"row {i} differs: cluster {a}, local {b}\n  SQL: {sql}"


def cluster_session(cluster, target_partitions: int = 4) -> ps.Session:
    """A session that sends every query to ``cluster``, however small (the test tables are
    far below the rows a query needs to go there by default)."""
    session = ps.Session(target_partitions=target_partitions, cluster=cluster)
    session.set_option("cluster_min_rows", 0)
    return session


def tpch_sessions(tpch_dir, cluster=None) -> ps.Session:
    """A session at 4 partitions reading the TPC-H Parquet files in ``tpch_dir`` by path
    (every query on ``cluster`` when one is given)."""
    session = cluster_session(cluster) if cluster is not None else \
        ps.Session(target_partitions=4)
    for name in sorted(os.listdir(tpch_dir)):
        session.register_parquet(name.split(".")[0], os.path.join(tpch_dir, name))
    return session
