"""FilterExec evaluates cheap conjuncts on the whole batch, costly (string) ones on what is left.

The split is visible in ``FilterExec.stages``; the answers must not change with it: NULLs
fail a conjunct wherever it is evaluated, an empty remainder skips the costly stage, and the
rows keep their order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.physical.filter import FilterExec, _kept
from tests.differential.harness import check


def _filters(plan):
    return [op for _, op in plan.walk() if isinstance(op, FilterExec)]


def _tables():
    rng = np.random.default_rng(21)
    n = 500
    modes = np.array(["MAIL", "SHIP", "AIR", "RAIL", "TRUCK"])

    def with_nulls(values, rate=0.1):
        return pa.array(values, mask=rng.random(len(values)) < rate)

    return {"t": pa.table({
        "d": with_nulls(np.datetime64("1994-01-01") + rng.integers(0, 700, n).astype(
            "timedelta64[D]")),
        "x": with_nulls(rng.integers(-5, 50, n)),
        "mode": with_nulls(modes[rng.integers(0, 5, n)]),
        "name": with_nulls(np.array([f"item {i % 37}" for i in range(n)])),
        "v": np.arange(n),
    })}


TABLES = _tables()


def test_string_conjuncts_form_the_second_stage_in_written_order():
    session = ps.Session(target_partitions=1)
    session.register("t", TABLES["t"])
    query = session.sql("SELECT v FROM t WHERE mode IN ('MAIL', 'SHIP') AND x > 3 "
                        "AND name LIKE 'item 1%' AND d >= DATE '1994-06-01'")
    stage_text = [str(stage) for stage in _filters(query.physical)[0].stages]
    assert len(stage_text) == 2
    assert "x" in stage_text[0] and "d" in stage_text[0] and "mode" not in stage_text[0]
    assert stage_text[1].index("mode") < stage_text[1].index("name"), stage_text


def test_one_kind_of_conjunct_is_one_stage():
    session = ps.Session(target_partitions=1)
    session.register("t", TABLES["t"])
    numbers = session.sql("SELECT v FROM t WHERE x > 3 AND x < 40")
    strings = session.sql("SELECT v FROM t WHERE mode = 'AIR' OR name = 'item 3'")
    assert [len(_filters(q.physical)[0].stages) for q in (numbers, strings)] == [1, 1]


QUERIES = [
    "SELECT v FROM t WHERE mode IN ('MAIL', 'SHIP') AND d >= DATE '1994-06-01' "
    "AND d < DATE '1995-01-01' ORDER BY v",
    "SELECT v, name FROM t WHERE name LIKE '%3' AND x BETWEEN 0 AND 10",
    "SELECT v FROM t WHERE (mode = 'AIR' OR x > 40) AND x IS NOT NULL AND name <> 'item 4'",
    "SELECT v FROM t WHERE mode IN ('MAIL', NULL) AND x > 0",
    "SELECT v FROM t WHERE NOT (mode IN ('RAIL')) AND x < 1000",
    "SELECT v FROM t WHERE x > 1000 AND mode = 'SHIP'",  # nothing reaches the second stage
    "SELECT count(*) FROM t WHERE d IS NULL AND mode IS NOT NULL AND name LIKE 'item%'",
    "SELECT v, x FROM t WHERE v >= 0",  # every row passes: batches go through uncopied
    "SELECT v FROM t WHERE v >= 0 AND mode <> 'no such mode'",
    "SELECT v FROM t WHERE v < 0",
]


@pytest.mark.parametrize("options", [
    pytest.param({"target_partitions": 1, "batch_size": 8192}, id="p1"),
    pytest.param({"target_partitions": 2, "batch_size": 7}, id="p2-b7"),
    pytest.param({"target_partitions": 3, "batch_size": 3}, id="p3-b3"),
    pytest.param({"target_partitions": 8, "batch_size": 1}, id="p8-b1"),
])
@pytest.mark.parametrize("sql", QUERIES)
def test_staged_filters_match_duckdb(sql, options):
    check(sql, TABLES, **options)


def test_a_mask_that_keeps_every_row_returns_the_batch_itself():
    batch = pa.record_batch({"a": [1, 2, 3], "s": ["x", None, "z"]})
    assert _kept(batch, pa.array([True, True, True])) is batch
    none = _kept(batch, pa.array([False, False, False]))
    assert none.num_rows == 0 and none.schema == batch.schema
    some = _kept(batch, pa.array([True, False, True]))
    assert some.to_pydict() == {"a": [1, 3], "s": ["x", "z"]}
    assert _kept(batch, pa.array([True, False, True]), kept=2).num_rows == 2
