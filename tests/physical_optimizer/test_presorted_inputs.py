"""EnsureRequirements over inputs already sorted by a source's declared order: a SortExec that
orders nothing is removed (merged or cut to its fetch instead), nothing is inserted for an
ordering the input already has, and a sort that does order something stays."""

from __future__ import annotations

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.logical.expr import SortKey
from plansight.engine.physical.plan import collect_partition, format_physical
from plansight.engine.physical.scan import DataSourceExec
from plansight.engine.physical.sorts.sort import SortExec
from plansight.engine.physical_optimizer.ensure_requirements import (
    ensure_requirements,
    ensure_single_output,
)

N = 1000


def _scan(partitions: int) -> DataSourceExec:
    session = ps.Session(target_partitions=partitions)
    session.register("t", pa.table({"a": list(range(N)), "b": [i % 3 for i in range(N)]}),
                     sorted_by=["a"])
    plan = session.sql("SELECT a, b FROM t").physical
    while not isinstance(plan, DataSourceExec):
        plan = plan.children()[0]
    assert plan.output_partitioning().count == partitions
    return plan


def _run(plan) -> list[int]:
    plan = ensure_single_output(plan)
    ctx = TaskContext(SessionConfig(batch_size=7), MemoryPool(None))
    return collect_partition(plan, 0, ctx).column(0).to_pylist()


def _lines(plan) -> list[str]:
    return [line.strip().split(":")[0] for line in format_physical(plan).splitlines()]


def test_sort_on_one_sorted_partition_is_removed():
    scan = _scan(1)
    plan = ensure_requirements(SortExec(list(scan.output_ordering()), scan), 1)
    assert plan is scan


def test_top_k_on_one_sorted_partition_becomes_a_limit():
    scan = _scan(1)
    plan = ensure_requirements(SortExec(list(scan.output_ordering()), scan, fetch=5), 1)
    assert _lines(plan) == ["GlobalLimitExec", "DataSourceExec"]
    assert _run(plan) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("fetch", [None, 5])
def test_sort_of_sorted_partitions_becomes_a_merge(fetch):
    scan = _scan(3)
    plan = ensure_requirements(SortExec(list(scan.output_ordering()), scan, fetch=fetch), 3)
    assert _lines(plan) == ["SortPreservingMergeExec", "DataSourceExec"]
    assert _run(plan) == list(range(N if fetch is None else fetch))


def test_partition_preserving_top_k_becomes_a_local_limit():
    scan = _scan(3)
    plan = ensure_requirements(
        SortExec(list(scan.output_ordering()), scan, fetch=4, preserve_partitioning=True), 3)
    assert _lines(plan) == ["LocalLimitExec", "DataSourceExec"]
    assert plan.output_partitioning().count == 3
    assert sorted(_run(plan)) == [0, 1, 2, 3, 333, 334, 335, 336, 666, 667, 668, 669]


def test_sort_in_the_other_direction_stays():
    scan = _scan(1)
    keys = [SortKey(scan.output_ordering()[0].expr, descending=True)]
    plan = ensure_requirements(SortExec(keys, scan), 1)
    assert _lines(plan) == ["SortExec", "DataSourceExec"]
    assert _run(plan) == list(range(N - 1, -1, -1))


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_nothing_is_inserted_for_an_order_the_input_has(partitions):
    session = ps.Session(target_partitions=partitions)
    session.register("t", pa.table({"a": list(range(N)), "b": [i % 3 for i in range(N)]}),
                     sorted_by=["a"])
    plan = session.sql("SELECT a, sum(b) OVER (ORDER BY a ROWS 1 PRECEDING) FROM t").explain()
    assert "SortExec" not in plan and "RepartitionExec" not in plan
    assert plan.count("SortPreservingMergeExec") == (partitions > 1)
