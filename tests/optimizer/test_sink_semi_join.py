"""A semi join (an IN subquery) sinks below the inner join that multiplies its side's rows,
however large its own input is estimated: it builds on that input either way and probes
fewer rows below (TPC-H Q18: orders, not orders x lineitem)."""

from __future__ import annotations

import pyarrow as pa

import plansight as ps
from plansight.engine.logical.plan import format_plan

Q18_LIKE = ("SELECT o_orderkey, sum(l_qty) FROM orders JOIN lineitem ON o_orderkey = l_orderkey "
            "WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey "
            "HAVING sum(l_qty) > 60) GROUP BY o_orderkey")


def session() -> ps.Session:
    s = ps.Session(target_partitions=1)
    s.register("orders", pa.table({"o_orderkey": list(range(1, 1001))}))
    # two line items per key over 4,000 keys: the inner join multiplies orders, and the
    # subquery's grouped estimate (4,000 keys x the HAVING's 1/3) is larger than orders
    s.register("lineitem", pa.table({"l_orderkey": [1 + i % 4000 for i in range(8000)],
                                     "l_qty": [i % 50 for i in range(8000)]}))
    return s


def test_semi_join_filters_orders_before_the_join_that_multiplies_them():
    lines = format_plan(session().sql(Q18_LIKE).optimized).splitlines()
    semi = next(i for i, line in enumerate(lines) if "Join: semi" in line)
    assert "TableScan: orders" in lines[semi + 1]  # its probe side is orders itself
    inner = next(i for i, line in enumerate(lines) if "Join: inner" in line)
    assert inner < semi  # and the inner join reads the filtered orders


def test_the_result_is_unchanged():
    import duckdb

    s = session()
    con = duckdb.connect()
    for name in ("orders", "lineitem"):
        con.register(name, s.sql(f"SELECT * FROM {name}").to_arrow())
    got = sorted(tuple(row.values()) for row in s.sql(Q18_LIKE).to_arrow().to_pylist())
    assert got == sorted(con.execute(Q18_LIKE).fetchall()) and got
