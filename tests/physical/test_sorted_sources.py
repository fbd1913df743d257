"""Sources that declare their sort order (``sorted_by``, Parquet ``sorting_columns``): the scan
reports it per partition, EXPLAIN shows it, and the plan skips the sorts it makes redundant."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps
from plansight.errors import PlanError

N = 10_000


def _table() -> pa.Table:
    return pa.table({"a": list(range(N)), "b": [i % 7 for i in range(N)],
                     "c": [f"s{i % 13}" for i in range(N)]})


def _session(partitions: int = 1, **register) -> ps.Session:
    session = ps.Session(target_partitions=partitions)
    session.register("t", _table(), **register)
    return session


def _scan_line(plan: str) -> str:
    return next(line for line in plan.splitlines() if "DataSourceExec" in line)


# ----------------------------------------------------------------------------- declaring

@pytest.mark.parametrize("spec, shown", [
    ("a", "a ASC NULLS LAST"),
    (["a DESC"], "a DESC NULLS LAST"),
    (["a desc nulls first", "b"], "a DESC NULLS FIRST, b ASC NULLS LAST"),
    ("a ASC NULLS FIRST, b DESC", "a ASC NULLS FIRST, b DESC NULLS LAST"),
    (['"A"'], "a ASC NULLS LAST"),  # names resolve case-insensitively when unambiguous
])
def test_declared_order_is_shown_on_the_scan(spec, shown):
    session = ps.Session(target_partitions=1)
    table = _table()
    if "DESC NULLS" in shown.split(",")[0]:
        table = table.take(pa.array(range(N - 1, -1, -1)))
    session.register("t", table, sorted_by=spec)
    plan = session.sql("SELECT a, b FROM t").explain()
    assert f"output_ordering=[{shown}]" in _scan_line(plan)


def test_no_declaration_means_no_ordering():
    assert "output_ordering" not in _session().sql("SELECT a FROM t").explain()


@pytest.mark.parametrize("spec, message", [
    (["z"], "unknown column 'z'"),
    (["a", "zz DESC"], "unknown column 'zz'"),
    (["a SIDEWAYS"], "cannot read sorted_by entry 'a SIDEWAYS'"),
    (["a", "a DESC"], "names column 'a' twice"),
    ([], "sorted_by is empty"),
    ([3], "sorted_by entries are strings"),
    (7, "sorted_by must be a column name"),
])
def test_bad_declarations_are_clear_errors(spec, message):
    with pytest.raises(PlanError, match=message):
        _session(sorted_by=spec)


@pytest.mark.parametrize("values, spec, row", [
    ([1, 2, 2, 1], "a", 3),
    ([3, 2, 2, 5], "a DESC", 3),
    ([1, None, 2], "a", 2),  # NULLS LAST: a value after a NULL
    ([None, 1, None], "a NULLS FIRST", 2),
    ([1.0, float("nan"), 2.0], "a", 2),  # NaN sorts after every number
    (["x", "y", "b"], "a", 2),
])
def test_in_memory_declaration_is_checked(values, spec, row):
    session = ps.Session(target_partitions=1)
    with pytest.raises(PlanError, match=rf"does not hold: row {row} sorts before row {row - 1}"):
        session.register("t", pa.table({"a": values}), sorted_by=spec)


@pytest.mark.parametrize("columns, spec", [
    ({"a": [1, 1, 2, None, None]}, "a"),
    ({"a": [None, 3, 3, 1]}, "a DESC NULLS FIRST"),
    ({"a": [1.0, 2.0, float("nan"), None]}, "a"),
    ({"a": [1, 1, 2, 2], "b": [5, 3, 9, 9]}, ["a", "b DESC"]),
    ({"a": [1, 1, 2, 2], "b": [5, 3, 9, 9]}, "a"),  # b free under a
    ({"a": []}, "a"),
])
def test_in_memory_declaration_that_holds_is_accepted(columns, spec):
    session = ps.Session(target_partitions=1)
    session.register("t", pa.table(columns), sorted_by=spec)
    assert "output_ordering" in session.sql("SELECT * FROM t").explain()


def test_tie_broken_the_wrong_way_is_reported():
    session = ps.Session(target_partitions=1)
    with pytest.raises(PlanError, match="row 1 sorts before row 0"):
        session.register("t", pa.table({"a": [1, 1], "b": [5, 3]}), sorted_by=["a", "b"])


def test_unknown_column_error_suggests_the_close_name():
    with pytest.raises(PlanError, match="Did you mean 'b'"):
        _session(sorted_by=["bb"])


def test_projection_keeps_the_leading_projected_keys_only():
    session = _session(sorted_by=["a", "b", "c"])
    assert "output_ordering=[a ASC NULLS LAST, b ASC NULLS LAST]" in \
        _scan_line(session.sql("SELECT a, b FROM t").explain())
    # without a, rows are not sorted by b or c at all
    assert "output_ordering" not in _scan_line(session.sql("SELECT b, c FROM t").explain())


# ----------------------------------------------------------------------------- plan shapes

@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_order_by_the_declared_order_needs_no_sort(partitions):
    session = _session(partitions, sorted_by="a")
    plan = session.sql("SELECT a, c FROM t ORDER BY a").explain()
    assert "SortExec" not in plan
    # several sorted partitions are merged, never sorted again
    assert ("SortPreservingMergeExec" in plan) == (partitions > 1)
    result = session.sql("SELECT a, c FROM t ORDER BY a").to_arrow()
    assert result.column("a").to_pylist() == list(range(N))


def test_other_direction_is_still_sorted():
    plan = _session(2, sorted_by="a").sql("SELECT a FROM t ORDER BY a DESC").explain()
    assert "SortExec: expr=[a DESC NULLS LAST]" in plan


def test_other_null_placement_is_still_sorted():
    plan = _session(1, sorted_by="a").sql("SELECT a FROM t ORDER BY a NULLS FIRST").explain()
    assert "SortExec" in plan


@pytest.mark.parametrize("partitions", [1, 3])
def test_group_by_the_declared_key_streams_sorted_groups(partitions):
    session = _session(partitions, sorted_by="a")
    plan = session.sql("SELECT a, count(*) FROM t GROUP BY a").explain()
    assert "ordering_mode=Sorted" in plan
    assert "ordering_mode=Sorted" not in _session(partitions).sql(
        "SELECT a, count(*) FROM t GROUP BY a").explain()


@pytest.mark.parametrize("partitions", [1, 3])
def test_window_over_the_declared_order_streams_without_a_sort(partitions):
    session = _session(partitions, sorted_by="a")
    sql = "SELECT a, sum(b) OVER (ORDER BY a ROWS 2 PRECEDING) AS s FROM t"
    plan = session.sql(sql).explain()
    assert "BoundedWindowAggExec" in plan and "SortExec" not in plan
    assert "HashWindowAggExec" not in plan
    got = session.sql(sql + " ORDER BY a").to_arrow().column("s").to_pylist()
    b = [i % 7 for i in range(N)]
    assert got == [sum(b[max(0, i - 2):i + 1]) for i in range(N)]


def test_equal_column_stands_for_the_declared_key():
    plan = _session(1, sorted_by="a").sql(
        "SELECT a, b FROM t WHERE a = b ORDER BY b").explain()
    assert "SortExec" not in plan


# ----------------------------------------------------------------------------- Parquet

def _write(path, table, row_group_size, **options):
    pq.write_table(table, path, row_group_size=row_group_size, **options)
    return str(path)


def test_parquet_declared_order_per_partition(tmp_path):
    path = _write(tmp_path / "t.parquet", _table(), 1000)
    session = ps.Session(target_partitions=3)
    session.register_parquet("t", path, sorted_by=["a"])
    scan = session.sql("SELECT a FROM t").physical
    while scan.children():
        scan = scan.children()[0]
    assert scan.output_partitioning().count == 3
    assert [str(k) for k in scan.output_ordering()] == ["a ASC NULLS LAST"]
    assert session.sql("SELECT a FROM t ORDER BY a").to_arrow().column("a").to_pylist() == \
        list(range(N))


def test_parquet_declaration_contradicted_by_statistics_is_an_error(tmp_path):
    path = _write(tmp_path / "t.parquet", _table(), 1000)
    session = ps.Session(target_partitions=1)
    with pytest.raises(PlanError, match=r"sorted_by a DESC NULLS LAST does not hold .* row "
                                        r"group 1 holds a = 1999 above"):
        session.register_parquet("t", path, sorted_by="a DESC")
    nulls = pa.table({"a": [None, 1, 2, 3]})
    path = _write(tmp_path / "n.parquet", nulls, 2)
    with pytest.raises(PlanError, match="NULL a"):
        session.register_parquet("n", path, sorted_by="a")  # NULLs first, declared last
    session.register_parquet("n", path, sorted_by="a NULLS FIRST")


def test_parquet_sorting_columns_metadata_is_picked_up(tmp_path):
    table = _table()
    sorting = pq.SortingColumn.from_ordering(table.schema, [("a", "ascending")])
    path = _write(tmp_path / "t.parquet", table, 1000, sorting_columns=sorting)
    session = ps.Session(target_partitions=2)
    session.register_parquet("t", path)
    plan = session.sql("SELECT a, b FROM t ORDER BY a").explain()
    assert "output_ordering=[a ASC NULLS LAST]" in plan and "SortExec" not in plan


def test_row_group_sorting_metadata_alone_does_not_order_the_file(tmp_path):
    """``sorting_columns`` describes each row group: overlapping row groups are not in order."""
    table = pa.table({"a": [i % 1000 for i in range(N)]})  # ten sorted runs of 0..999
    sorted_runs = table.take(pa.array(sorted(range(N), key=lambda i: (i // 1000, i % 1000))))
    sorting = pq.SortingColumn.from_ordering(table.schema, [("a", "ascending")])
    path = _write(tmp_path / "t.parquet", sorted_runs, 1000, sorting_columns=sorting)
    session = ps.Session(target_partitions=1)
    session.register_parquet("t", path)
    plan = session.sql("SELECT a FROM t ORDER BY a").explain()
    assert "SortExec" in plan and "output_ordering" not in plan
    assert session.sql("SELECT a FROM t ORDER BY a").to_arrow().column("a").to_pylist() == \
        sorted(i % 1000 for i in range(N))


def test_sorted_files_are_never_mixed_in_one_partition(tmp_path):
    """Each file is sorted on its own; partitions split at file boundaries stay sorted."""
    folder = tmp_path / "parts"
    folder.mkdir()
    for k in range(2):  # both files hold 0..4999: the folder as a whole is not sorted
        _write(folder / f"{k}.parquet", pa.table({"a": list(range(5000))}), 500)
    session = ps.Session(target_partitions=3)
    session.register_parquet("t", str(folder), sorted_by="a")
    plan = session.sql("SELECT a FROM t ORDER BY a").explain()
    assert "SortExec" not in plan and "output_ordering=[a ASC NULLS LAST]" in plan
    got = session.sql("SELECT a FROM t ORDER BY a").to_arrow().column("a").to_pylist()
    assert got == sorted(list(range(5000)) * 2)
    # one partition would have to read both files in turn: no ordering, a real sort
    single = ps.Session(target_partitions=1)
    single.register_parquet("t", str(folder), sorted_by="a")
    plan = single.sql("SELECT a FROM t ORDER BY a").explain()
    assert "SortExec" in plan and "output_ordering" not in plan
    assert single.sql("SELECT a FROM t ORDER BY a").to_arrow().column("a").to_pylist() == got


def test_files_in_order_by_statistics_keep_one_partition_sorted(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    for k in range(3):
        _write(folder / f"{k}.parquet", pa.table({"a": list(range(k * 100, k * 100 + 100))}),
               50)
    session = ps.Session(target_partitions=1)
    session.register_parquet("t", str(folder), sorted_by="a")
    assert "SortExec" not in session.sql("SELECT a FROM t ORDER BY a").explain()
