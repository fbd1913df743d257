"""The monitor's per-partition skew panel: quantiles, the worst partition, the 4x flag."""

from __future__ import annotations

import pyarrow as pa

import plansight as ps
from plansight.widgets.plan_view import QueryMonitor, render_html, render_text, skew_summary


def test_skew_summary():
    summary = skew_summary((100, 120, 90, 110))
    assert (summary["min"], summary["max"], summary["worst"]) == (90, 120, 1)
    assert summary["median"] == 105 and not summary["skewed"]
    assert skew_summary((10, 10, 10, 40))["skewed"]  # exactly 4x the median
    assert not skew_summary((10, 10, 10, 39))["skewed"]
    assert not skew_summary((7,))["skewed"] and not skew_summary(())["skewed"]


def test_skewed_group_key_is_flagged():
    keys = [0] * 9000 + list(range(1, 1001))  # 90% of the rows share one key
    table = pa.table({"k": keys, "v": list(range(len(keys)))})
    session = ps.Session(target_partitions=4)
    session.register("t", pa.Table.from_batches(table.to_batches(max_chunksize=1000)))
    # count(DISTINCT) cannot pre-aggregate: every row crosses the repartition by key
    query = session.sql("SELECT k, count(DISTINCT v) AS d FROM t GROUP BY k")
    monitor = QueryMonitor(query, live=False, show=False)
    run = monitor.run()
    snap = monitor.snapshot()
    ((operator_id, rows),) = snap.repartitions.items()
    assert sum(rows) == run.ctx.metrics.total(operator_id, "output_rows") == 10_000
    worst = skew_summary(rows)["worst"]
    assert rows[worst] >= 9000
    html = render_html(snap, run.plan)
    assert "plansight-skewed" in html and f"skewed: partition {worst}" in html
    assert f"skewed: partition {worst}" in render_text(snap, run.plan)
