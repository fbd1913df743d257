"""Windows that see the order of tied rows see them in the source's order (#14 item 7).

``row_number() OVER (PARTITION BY g)``, lag/lead, ntile, first_value and ROWS frames depend
on the order of the rows their ORDER BY leaves tied. plansight gives them the source's
order, so one query has one answer at every partition count and batch size. The oracle is
DuckDB running the same query with the source position (``id``) appended to every window's
ORDER BY, which makes that order explicit; the table has heavy ties, NULL keys and an empty
variant. Every window executor keeps that order: the hash executor permutes stably over
input merged in source order, the sorted ones sort by a source position as the last key.
Windows whose values only read peer groups (rank, RANGE frames) keep sharing a longer
permutation or sort, checked by the plan tests at the end.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from tests.differential.harness import assert_same, run_duckdb, run_plansight


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(np.arange(rows)),
        "g": pa.array(rng.integers(0, 4, rows), mask=rng.random(rows) < 0.1),
        "v": pa.array(rng.integers(0, 3, rows), mask=rng.random(rows) < 0.1),
        "x": pa.array(rng.integers(-50, 50, rows)),
    })


TABLES = {"t": _table(300, 11), "t_empty": _table(300, 11).slice(0, 0)}

# (plansight's windows, the same with the source order made explicit for DuckDB)
WINDOWS = [
    ("row_number() OVER (PARTITION BY g)", "row_number() OVER (PARTITION BY g ORDER BY id)"),
    ("row_number() OVER ()", "row_number() OVER (ORDER BY id)"),
    ("lag(x) OVER (PARTITION BY g)", "lag(x) OVER (PARTITION BY g ORDER BY id)"),
    ("lead(x, 2) OVER (PARTITION BY g ORDER BY v)",
     "lead(x, 2) OVER (PARTITION BY g ORDER BY v, id)"),
    ("ntile(3) OVER (PARTITION BY v)", "ntile(3) OVER (PARTITION BY v ORDER BY id)"),
    ("first_value(x) OVER (PARTITION BY g ORDER BY v ROWS UNBOUNDED PRECEDING)",
     "first_value(x) OVER (PARTITION BY g ORDER BY v, id ROWS UNBOUNDED PRECEDING)"),
    ("sum(x) OVER (ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
     "sum(x) OVER (ORDER BY v, id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)"),
    ("last_value(x) OVER (PARTITION BY v ORDER BY g DESC NULLS FIRST ROWS BETWEEN CURRENT ROW "
     "AND 2 FOLLOWING)",
     "last_value(x) OVER (PARTITION BY v ORDER BY g DESC NULLS FIRST, id ROWS BETWEEN CURRENT "
     "ROW AND 2 FOLLOWING)"),
]

# a tie-sensitive window beside one with a longer ORDER BY, which it must not share
PAIRED = ("row_number() OVER (PARTITION BY g ORDER BY v) AS a, "
          "sum(x) OVER (PARTITION BY g ORDER BY v, x DESC ROWS UNBOUNDED PRECEDING) AS b",
          "row_number() OVER (PARTITION BY g ORDER BY v, id) AS a, "
          "sum(x) OVER (PARTITION BY g ORDER BY v, x DESC, id ROWS UNBOUNDED PRECEDING) AS b")

# tie-sensitive windows on one ordering and its reverse: the sorted executors share a sort
# and read the reversed one backwards, each group of ties still forwards
REVERSED = ("lag(x) OVER (PARTITION BY g ORDER BY v DESC) AS a, first_value(x) OVER "
            "(PARTITION BY g ORDER BY v ROWS 2 PRECEDING) AS b, lead(x) OVER (PARTITION BY g "
            "ORDER BY v DESC NULLS FIRST) AS c",
            "lag(x) OVER (PARTITION BY g ORDER BY v DESC, id) AS a, first_value(x) OVER "
            "(PARTITION BY g ORDER BY v, id ROWS 2 PRECEDING) AS b, lead(x) OVER (PARTITION BY g "
            "ORDER BY v DESC NULLS FIRST, id) AS c")

CASES = [pytest.param(f"SELECT id, {mine} AS w FROM {{table}}",
                      f"SELECT id, {theirs} AS w FROM {{table}}", id=mine[:40])
         for mine, theirs in WINDOWS]
CASES.append(pytest.param(f"SELECT id, {PAIRED[0]} FROM {{table}}",
                          f"SELECT id, {PAIRED[1]} FROM {{table}}", id="paired"))
CASES.append(pytest.param(f"SELECT id, {REVERSED[0]} FROM {{table}}",
                          f"SELECT id, {REVERSED[1]} FROM {{table}}", id="reversed"))

RUNS = [(1, 8192), (2, 3), (3, 7), (8, 1)]  # (partitions, batch size)


@pytest.mark.parametrize("executor", ["auto", "sorted", "partition"])
@pytest.mark.parametrize("table", ["t", "t_empty"])
@pytest.mark.parametrize(("partitions", "batch_size"), RUNS)
@pytest.mark.parametrize(("mine", "theirs"), CASES)
def test_tied_rows_are_seen_in_source_order(mine, theirs, table, partitions, batch_size,
                                            executor):
    actual = run_plansight(mine.format(table=table), TABLES, target_partitions=partitions,
                           batch_size=batch_size, window_executor=executor)
    expected = run_duckdb(theirs.format(table=table), TABLES)
    assert_same(actual, expected, ordered=False, sql=mine)


def test_a_result_without_order_by_keeps_the_source_order():
    # the window's output keeps its input's order, which is the source's
    session = ps.Session(target_partitions=3, batch_size=7)
    session.register("t", TABLES["t"])
    ids = session.sql("SELECT id, row_number() OVER () AS n FROM t").to_arrow()
    assert ids.column("id").to_pylist() == list(range(300))
    assert ids.column("n").to_pylist() == list(range(1, 301))


def test_peer_group_windows_still_share_a_longer_permutation():
    session = ps.Session(target_partitions=2)
    session.register("t", TABLES["t"])
    plan = session.sql("SELECT rank() OVER (PARTITION BY g ORDER BY v) AS r, sum(x) OVER "
                       "(PARTITION BY g ORDER BY v, x) AS s, row_number() OVER (PARTITION BY g "
                       "ORDER BY v) AS n FROM t").explain()
    line = next(text for text in plan.splitlines() if "HashWindowAggExec" in text)
    # rank reads peer groups only: it reuses the (g, v, x) permutation; row_number sees
    # ties, so it gets a (g, v) permutation of its own
    assert line.count("permuted by [g, v ASC NULLS LAST, x ASC NULLS LAST]") == 2
    assert line.count("permuted by [g, v ASC NULLS LAST]") == 1


@pytest.mark.parametrize("executor", ["sorted", "partition"])
def test_sorted_executors_break_ties_by_source_position_only_where_ties_are_seen(executor):
    session = ps.Session(target_partitions=2)
    session.set_option("window_executor", executor)
    session.register("t", TABLES["t"])
    plan = session.sql("SELECT rank() OVER (PARTITION BY g ORDER BY v) AS r, sum(x) OVER "
                       "(PARTITION BY g ORDER BY v DESC) AS s FROM t").explain()
    assert "__source_position" not in plan  # peer groups only: no position, one sort
    assert plan.count("SortExec") == 1
    plan = session.sql("SELECT row_number() OVER (PARTITION BY g ORDER BY v) AS n, sum(x) OVER "
                       "(PARTITION BY g ORDER BY v, x) AS s, lag(x) OVER (ORDER BY v) AS l "
                       "FROM t").explain()
    # row_number's ties may not be ordered by x: a sort of its own, position last
    assert plan.count("SourcePositionExec") == 1
    assert "expr=[g ASC NULLS LAST, v ASC NULLS LAST, __source_position ASC NULLS LAST]" in plan
    assert "expr=[v ASC NULLS LAST, __source_position ASC NULLS LAST]" in plan
    assert "CoalescePartitionsExec: preserve_order=true" in plan
    top = plan.splitlines()[0]
    assert "__source_position" not in top
