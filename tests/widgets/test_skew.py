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


def hot_key_run():
    """A monitored hot-key aggregate at 4 partitions: (run, final snapshot)."""
    keys = [0] * 9000 + list(range(1, 1001))  # 90% of the rows share one key
    table = pa.table({"k": keys, "v": list(range(len(keys)))})
    session = ps.Session(target_partitions=4)
    session.register("t", pa.Table.from_batches(table.to_batches(max_chunksize=1000)))
    # count(DISTINCT) cannot pre-aggregate: every row crosses the repartition by key
    query = session.sql("SELECT k, count(DISTINCT v) AS d FROM t GROUP BY k")
    monitor = QueryMonitor(query, live=False, show=False)
    run = monitor.run()
    return run, monitor.snapshot()


def test_skewed_group_key_is_flagged():
    run, snap = hot_key_run()
    ((operator_id, rows),) = snap.repartitions.items()
    assert sum(rows) == run.ctx.metrics.total(operator_id, "output_rows") == 10_000
    worst = skew_summary(rows)["worst"]
    assert rows[worst] >= 9000
    html = render_html(snap, run.plan)
    assert "plansight-skewed" in html and f"skewed: partition {worst}" in html
    assert f"skewed: partition {worst}" in render_text(snap, run.plan)


def test_time_per_partition_is_the_consumers_own_compute_per_partition():
    run, snap = hot_key_run()
    ((operator_id, rows),) = snap.repartitions.items()
    times = snap.repartition_times[operator_id]
    assert len(times) == len(rows) == 4 and min(times) >= 0 and sum(times) > 0
    # the operators above the repartition up to the next exchange, partition by partition
    from plansight.widgets.plan_view import consumers_of_exchanges

    consumers = consumers_of_exchanges(run.plan)[operator_id]
    assert consumers and operator_id not in consumers
    for partition, seconds in enumerate(times):
        expected = sum(
            m["elapsed_compute"] for i in consumers for m in run.ctx.metrics.partitions(i)
            if m.partition == partition)
        assert abs(seconds - expected) <= 1e-6 + 0.05 * expected
    html = render_html(snap, run.plan)
    assert "; time min " in html and " ms'" in html  # the quantiles, and ms per bar on hover
    assert "time per partition: min " in render_text(snap, run.plan)
