"""The plan graph (SVG beside the monitor's table) and the collapsed view of short queries."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.events import SpillWritten
from plansight.widgets.plan_graph import NODE_WIDTH, render_plan_svg, tree_layout
from plansight.widgets.plan_view import (
    QueryMonitor,
    plan_rows,
    render_frozen_html,
    render_html,
    self_times,
)

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def session():
    s = ps.Session(target_partitions=2)
    s.register("t", pa.table({"k": [i % 7 for i in range(500)], "v": list(range(500))}))
    s.register("u", pa.table({"k": list(range(7)), "name": [f"n{i}" for i in range(7)]}))
    return s


JOIN = ("SELECT u.name, sum(t.v) AS s FROM t JOIN u ON t.k = u.k "
        "GROUP BY u.name ORDER BY s DESC")


def test_layout_places_parents_over_their_children_and_leaves_in_order(session):
    plan = session.sql(JOIN).physical
    layout = tree_layout(plan)
    assert [op for op, *_ in layout] == [op for _, op in plan_rows(plan)]
    assert len(layout) >= 8
    children: dict[int, list[int]] = {}
    for index, (_, _, depth, parent) in enumerate(layout):
        if parent is None:
            assert depth == 0
            continue
        assert layout[parent][2] == depth - 1  # a parent is one row up
        children.setdefault(parent, []).append(index)
    for parent, kids in children.items():
        columns = [layout[k][1] for k in kids]
        assert layout[parent][1] == (columns[0] + columns[-1]) / 2
        assert columns == sorted(columns)
    leaves = [column for i, (_, column, _, _) in enumerate(layout) if i not in children]
    assert leaves == [float(i) for i in range(len(leaves))]  # one column per leaf, in order
    boxes = {(column, depth) for _, column, depth, _ in layout}
    assert len(boxes) == len(layout)  # no two operators share a box


def test_graph_has_one_box_per_operator_shaded_by_self_time(session):
    query = session.sql(JOIN)
    monitor = QueryMonitor(query, live=False, show=False)
    run = monitor.run()
    snap = monitor.snapshot()
    times, hot = self_times(snap, run.plan)
    svg = render_plan_svg(snap, run.plan, times, hot)
    root = ElementTree.fromstring(svg)  # well-formed, self-contained SVG
    nodes = [g for g in root.iter(f"{SVG}g") if "plansight-node" in g.get("class", "")]
    assert [int(g.get("data-operator-id")) for g in nodes] == \
        [op.operator_id for _, op in plan_rows(run.plan)]
    hot_nodes = [g for g in nodes if "plansight-node-hot" in g.get("class")]
    assert [int(g.get("data-operator-id")) for g in hot_nodes] == [hot]
    assert hot_nodes[0].find(f"{SVG}rect").get("stroke") == "#d62728"
    # the hottest box is the reddest: its green channel is the lowest
    green = {int(g.get("data-operator-id")): int(re.match(
        r"rgb\(255,(\d+),", g.find(f"{SVG}rect").get("fill")).group(1)) for g in nodes}
    assert green[hot] == min(green.values())
    # each box names its operator and says its rows; the full EXPLAIN line is its tooltip
    for g, (_, op) in zip(nodes, plan_rows(run.plan)):
        texts = [t.text for t in g.iter(f"{SVG}text")]
        assert texts[0] == op.name
        rows = int(run.metrics.total(op.operator_id, "output_rows"))
        assert texts[1].startswith(f"{rows:,} rows")
        assert g.find(f"{SVG}title").text.startswith(op.name)
    edges = root.findall(f"{SVG}line")
    assert len(edges) == len(nodes) - 1  # a tree
    assert "http" not in svg.replace("http://www.w3.org/2000/svg", "")  # no network assets
    assert int(root.get("width")) >= NODE_WIDTH


def test_graph_labels_spills_and_memory(session):
    query = session.sql("SELECT v FROM t ORDER BY v")
    monitor = QueryMonitor(query, live=False, show=False)
    sort = next(op for _, op in plan_rows(query.physical) if op.name == "SortExec")
    monitor(SpillWritten("SortExec", 100, 4096, "/tmp/x", operator_id=sort.operator_id))
    snap = monitor.snapshot()
    times, hot = self_times(snap, query.physical)
    svg = render_plan_svg(snap, query.physical, times, hot)
    node = re.search(rf"data-operator-id='{sort.operator_id}'>.*?</g>", svg).group(0)
    assert "⛁ 1× 4.0 KiB" in node


def test_monitor_html_shows_the_graph_beside_the_table(session):
    monitor = QueryMonitor(session.sql(JOIN), live=False, show=False)
    run = monitor.run()
    page = render_html(monitor.snapshot(), run.plan)
    assert page.index("<table") < page.index("<svg class='plansight-graph'")


def test_a_short_query_collapses_to_its_headline_and_a_slow_one_stays_open(session):
    monitor = QueryMonitor(session.sql("SELECT count(*) FROM t"), live=False, show=False)
    run = monitor.run()
    snap = monitor.snapshot()
    assert snap.elapsed < 0.5
    frozen = render_frozen_html(snap, run.plan)
    assert frozen.startswith("<details class='plansight-collapsed'")
    summary = re.search(r"<summary[^>]*>(.*?)</summary>", frozen).group(1)
    assert summary.startswith("finished ·") and "1 rows" in summary
    assert "<table" in frozen  # the full monitor opens on click
    assert not render_frozen_html(snap, run.plan, detail=True).startswith("<details")
    from dataclasses import replace

    slow = replace(snap, elapsed=2.0)
    assert not render_frozen_html(slow, run.plan).startswith("<details")
    failed = replace(snap, status="failed", error="boom")
    assert not render_frozen_html(failed, run.plan).startswith("<details")


def test_analyze_detail_adds_every_metric_to_the_table(session):
    monitor = QueryMonitor(session.sql("SELECT v FROM t ORDER BY v"), live=False, show=False,
                           detail=True)
    run = monitor.run()
    snap = monitor.snapshot()
    page = render_frozen_html(snap, run.plan, detail=True)
    assert "<th style='text-align:left;padding:1px 8px;line-height:1.35'>metrics</th>" in page
    scan = next(op for _, op in plan_rows(run.plan) if op.name == "DataSourceExec")
    rows_read = int(run.metrics.total(scan.operator_id, "rows_read"))
    assert rows_read == 500 and f"rows_read={rows_read}" in page
    assert "class='plansight-metrics'" not in render_html(snap, run.plan)  # only on detail


def test_a_large_frozen_plan_folds_its_quiet_subtrees():
    from pathlib import Path

    from plansight.datasets import load_sample
    from plansight.widgets.plan_view import _EXCHANGES, MANY_OPERATORS

    s = ps.Session(target_partitions=2)
    load_sample(s, "tpch", 0.01)
    queries = Path(ps.__file__).parent / "datasets" / "tpch_queries"
    query = s.sql((queries / "q21.sql").read_text())
    monitor = QueryMonitor(query, live=False, show=False)
    run = monitor.run()
    snap = monitor.snapshot()
    rows = plan_rows(run.plan)
    assert len(rows) >= MANY_OPERATORS
    page = render_frozen_html(snap, run.plan)
    exchanges = [op for depth, op in rows[1:] if op.name in _EXCHANGES]
    assert page.count("<details class='plansight-subtree'") == len(exchanges) > 0
    # every operator keeps exactly one row, in EXPLAIN order, and the markup nests properly
    found = [int(i) for i in re.findall(r"<tr data-operator-id='(\d+)'", page)]
    assert found == [op.operator_id for _, op in rows]
    for tag in ("details", "table", "tbody"):  # every fold and table closes
        assert page.count(f"<{tag}") == page.count(f"</{tag}>")
    assert "<tbody></tbody>" not in page  # no empty table between two folds
    times, hot = self_times(snap, run.plan)
    hot_fold = re.findall(r"<details class='plansight-subtree' data-operator-id='(\d+)'( open)?",
                          page)
    assert any(flag for _, flag in hot_fold) or hot == rows[0][1].operator_id
    # a small plan keeps its one table
    small = QueryMonitor(s.sql("SELECT count(*) FROM nation"), live=False, show=False)
    small.run()
    assert "plansight-subtree" not in render_frozen_html(small.snapshot(), small.query.physical)
