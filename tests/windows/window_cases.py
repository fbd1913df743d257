"""The systematic window queries and input shapes shared by the window test modules.

Every function x frame unit x bound pair x EXCLUDE. ROWS frames order by (o, id) so that ties
cannot make the answer engine-dependent; RANGE and GROUPS frames order by ``o`` alone, so peers
(ties, NULLs) are exercised.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa


def _table(rows: int, partitions: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    p = rng.integers(0, partitions, rows).astype(object)
    p[rng.random(rows) < 0.1] = None
    o = rng.integers(0, max(2, rows // 4), rows).astype(object)  # many ties
    o[rng.random(rows) < 0.1] = None
    v = np.round(rng.normal(size=rows) * 10, 2).astype(object)
    v[rng.random(rows) < 0.15] = None
    return pa.table({"id": pa.array(np.arange(rows), pa.int64()),
                     "p": pa.array(list(p), pa.int64()), "o": pa.array(list(o), pa.int64()),
                     "v": pa.array(list(v), pa.float64())})


TABLES = {
    "mixed": _table(60, 4, 1),
    "tiny_partitions": _table(200, 80, 2),
    "one_partition": _table(50, 1, 3),
    "empty": _table(0, 1, 4),
}

BOUNDS = ["UNBOUNDED PRECEDING", "2 PRECEDING", "CURRENT ROW", "1 FOLLOWING",
          "UNBOUNDED FOLLOWING"]
FRAMES = [(a, b) for a, b in itertools.combinations_with_replacement(BOUNDS, 2)
          if a != "UNBOUNDED FOLLOWING" and b != "UNBOUNDED PRECEDING"]
AGGREGATES = ["sum(v)", "count(v)", "count(*)", "avg(v)", "min(v)", "max(v)"]
EXCLUDES = ["", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES"]


def _frame_queries():
    for unit in ("ROWS", "RANGE", "GROUPS"):
        order = "o, id" if unit == "ROWS" else "o"
        for (start, end), func in itertools.product(FRAMES, AGGREGATES):
            yield (f"SELECT id, {func} OVER (PARTITION BY p ORDER BY {order} {unit} BETWEEN "
                   f"{start} AND {end}) AS w FROM t")
    for exclude, func, unit in itertools.product(EXCLUDES[1:], ["sum(v)", "count(*)", "min(v)"],
                                                 ("ROWS", "RANGE", "GROUPS")):
        order = "o, id" if unit == "ROWS" else "o"
        yield (f"SELECT id, {func} OVER (PARTITION BY p ORDER BY {order} {unit} BETWEEN "
               f"1 PRECEDING AND 1 FOLLOWING{exclude}) AS w FROM t")
    for direction in ("ASC", "DESC", "DESC NULLS FIRST", "ASC NULLS FIRST"):
        yield (f"SELECT id, sum(v) OVER (PARTITION BY p ORDER BY o {direction} RANGE BETWEEN "
               f"3 PRECEDING AND 1 FOLLOWING) AS w FROM t")
        yield f"SELECT id, count(*) OVER (PARTITION BY p ORDER BY o {direction}) AS w FROM t"


RANKING = ["row_number() OVER (PARTITION BY p ORDER BY o, id)",
           "rank() OVER (PARTITION BY p ORDER BY o)",
           "dense_rank() OVER (PARTITION BY p ORDER BY o DESC)",
           "percent_rank() OVER (PARTITION BY p ORDER BY o)",
           "cume_dist() OVER (PARTITION BY p ORDER BY o)",
           "ntile(3) OVER (PARTITION BY p ORDER BY o, id)",
           "lag(v) OVER (PARTITION BY p ORDER BY o, id)",
           "lead(v, 2, -1.0) OVER (PARTITION BY p ORDER BY o, id)",
           "first_value(v) OVER (PARTITION BY p ORDER BY o, id)",
           "last_value(v) OVER (PARTITION BY p ORDER BY o, id ROWS BETWEEN 1 PRECEDING AND "
           "2 FOLLOWING)",
           "nth_value(v, 2) OVER (PARTITION BY p ORDER BY o, id ROWS BETWEEN UNBOUNDED "
           "PRECEDING AND UNBOUNDED FOLLOWING)",
           "sum(v) OVER (PARTITION BY p)", "count(*) OVER ()", "avg(v) OVER (ORDER BY o)",
           "sum(v) FILTER (WHERE v > 0) OVER (PARTITION BY p ORDER BY o, id)",
           "count(DISTINCT o) OVER (PARTITION BY p)",
           "stddev_samp(v) OVER (PARTITION BY p)", "var_pop(v) OVER (PARTITION BY p ORDER BY o)"]


def _other_queries():
    for func in RANKING:
        yield f"SELECT id, {func} AS w FROM t"
    yield ("SELECT id, sum(v) OVER w AS a, count(*) OVER w AS b FROM t "
           "WINDOW w AS (PARTITION BY p ORDER BY o, id)")
    yield ("SELECT id, rank() OVER (PARTITION BY p ORDER BY o) AS r FROM t "
           "QUALIFY r <= 2")
    yield ("SELECT p, sum(v) AS s, rank() OVER (ORDER BY sum(v) DESC NULLS LAST, p) AS r "
           "FROM t GROUP BY p")
    yield ("WITH x AS (SELECT id, v, lag(v) OVER (PARTITION BY p ORDER BY o, id) AS prev "
           "FROM t) SELECT id, v - prev AS delta FROM x WHERE prev IS NOT NULL")


QUERIES = list(_frame_queries()) + list(_other_queries())
