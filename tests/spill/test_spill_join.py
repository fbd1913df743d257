"""HashJoinExec under a memory limit far below its build side: a grace hash join that spills
both sides into hash buckets returns exactly the rows of an unlimited run."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.events import ReservationChanged, SpillWritten
from plansight.engine.exec.spill import SpillManager, SpillWriter
from plansight.errors import Cancelled, ExecutionError, ResourcesExhausted
from tests.differential.harness import assert_same
from tests.session_defaults import session_defaults

LIMIT = 700_000
PROBE_ROWS, BUILD_ROWS = 200_000, 130_000


def _keys(rng, n: int, high: int, null_share: float) -> pa.Array:
    return pa.array(rng.integers(0, high, n), mask=rng.random(n) < null_share)


@pytest.fixture(scope="module")
def tables() -> dict[str, pa.Table]:
    """p streams (probe), b is the smaller side the planner builds on; both have NULL and
    duplicate keys, and keys found on one side only."""
    rng = np.random.default_rng(5)
    p = pa.table({"k": _keys(rng, PROBE_ROWS, 100_000, 0.02), "id": np.arange(PROBE_ROWS),
                  "v": rng.random(PROBE_ROWS)})
    b = pa.table({"k": _keys(rng, BUILD_ROWS, 130_000, 0.02), "w": rng.random(BUILD_ROWS),
                  "s": pa.array([f"n{i:06d}" for i in range(BUILD_ROWS)])})
    assert b.nbytes > 4 * LIMIT and p.nbytes > 6 * LIMIT
    return {"p": p, "b": b}


QUERIES = {  # name: (SQL, physical join type)
    "inner": ("SELECT p.id, p.k, b.w, b.s FROM p JOIN b ON p.k = b.k", "inner"),
    "left_keeps_probe": ("SELECT p.id, b.s FROM p LEFT JOIN b ON p.k = b.k", "right"),
    "left_keeps_build": ("SELECT b.s, p.id FROM b LEFT JOIN p ON p.k = b.k", "left"),
    "full_with_filter": ("SELECT p.id, b.s FROM p FULL JOIN b ON p.k = b.k AND p.v < b.w",
                         "full"),
    "semi_on_probe": ("SELECT id FROM p WHERE k IN (SELECT k FROM b)", "right_semi"),
    "semi_on_build": ("SELECT s FROM b WHERE EXISTS (SELECT 1 FROM p WHERE p.k = b.k)",
                      "left_semi"),
    "anti_on_probe": ("SELECT id FROM p WHERE NOT EXISTS (SELECT 1 FROM b WHERE p.k = b.k)",
                      "right_anti"),
    "anti_on_build_with_filter": (
        "SELECT s FROM b WHERE NOT EXISTS (SELECT 1 FROM p WHERE p.k = b.k AND p.v < b.w)",
        "left_anti"),
    "not_in": ("SELECT id FROM p WHERE k NOT IN (SELECT k FROM b WHERE k IS NOT NULL)",
               "right_anti"),
    "not_in_with_null": ("SELECT id FROM p WHERE k NOT IN (SELECT k FROM b)", "right_anti"),
    "except": ("SELECT k FROM p EXCEPT SELECT k FROM b", "left_anti"),
}

# (target_partitions, join mode); partitioned mode is forced by lowering the planner's
# threshold, collect-left with 3 partitions shares one spilled build among 3 probe streams
# (left, full, semi and anti joins: the last probe partition to split joins every bucket)
MODES = [(1, "CollectLeft"), (3, "CollectLeft"), (2, "Partitioned")]


class Recorder:
    def __init__(self):
        self.max_total = 0
        self.join_spills = 0

    def __call__(self, event):
        if isinstance(event, ReservationChanged):
            # a lagging observer sees only each consumer's latest change; pool_peak is exact
            self.max_total = max(self.max_total, event.pool_total, event.pool_peak)
        elif isinstance(event, SpillWritten) and event.operator == "HashJoinExec":
            self.join_spills += 1


def _session(tables, tmp_path, limit=LIMIT, partitions=1, batch_size=4096) -> ps.Session:
    s = ps.Session(target_partitions=partitions, memory_limit=limit, batch_size=batch_size,
                   spill_dir=str(tmp_path))
    for name, table in tables.items():
        s.register(name, table)
    return s


def _sorted(table: pa.Table) -> pa.Table:
    table = table.rename_columns([f"c{i}" for i in range(table.num_columns)])
    return table.sort_by([(name, "ascending") for name in table.column_names])


def _join_spill_counts(run) -> list[int]:
    return [int(x) for line in run.explain_analyze().splitlines() if "HashJoinExec" in line
            for x in re.findall(r"spill_count=(\d+)", line)]


_unlimited: dict[str, pa.Table] = {}


def _unlimited_result(tables, name, tmp_path) -> pa.Table:
    if name not in _unlimited:
        s = _session(tables, tmp_path, limit=None)
        _unlimited[name] = _sorted(s.sql(QUERIES[name][0]).to_arrow())
    return _unlimited[name]


@pytest.mark.parametrize("name, partitions, mode", [
    (name, partitions, mode) for name in sorted(QUERIES) for partitions, mode in MODES
    # NOT IN is always planned collect-left: it must see every build key
    if not (mode == "Partitioned" and "not_in" in name)])
def test_spilled_join_equals_the_unlimited_run(tables, name, partitions, mode, tmp_path,
                                               monkeypatch):
    sql, join_type = QUERIES[name]
    if mode == "Partitioned":
        session_defaults(monkeypatch, hash_join_single_partition_threshold_rows=1)
    expected = _unlimited_result(tables, name, tmp_path)
    s = _session(tables, tmp_path, partitions=partitions)
    query = s.sql(sql)
    assert f"mode={mode}, join_type={join_type}" in query.explain()
    recorder = Recorder()
    run = query.execute(observer=recorder)
    assert _sorted(run.result).equals(expected)
    assert sum(_join_spill_counts(run)) > 0 and recorder.join_spills > 0
    assert 0 < recorder.max_total <= LIMIT
    assert any(operator == "HashJoinExec" and rows > 0 for operator, _, rows, _ in run.spills)
    assert run.ctx.memory_pool.reserved == 0
    assert list(tmp_path.iterdir()) == []


def test_not_in_with_a_null_on_the_spilled_build_side_is_empty(tables, tmp_path):
    """x NOT IN (..., NULL) is never true, even when that NULL sits in a spilled bucket."""
    assert tables["b"].column("k").null_count > 0
    run = _session(tables, tmp_path).sql(QUERIES["not_in_with_null"][0]).execute()
    assert run.result.num_rows == 0 and sum(_join_spill_counts(run)) > 0
    expected = _unlimited_result(tables, "not_in", tmp_path)
    assert expected.num_rows > 0  # with the NULL filtered out the answer is not empty
    assert tables["p"].column("k").null_count > 0  # and excludes the probe's NULL keys


@pytest.fixture(scope="module")
def tpch_tables():
    from plansight.datasets import tpch

    return tpch(0.1)  # lineitem 600k rows, ~140 MB in memory


def test_tpch_multi_join_spills_and_equals_the_unlimited_run(tpch_tables, tmp_path):
    sql = """
        SELECT l_orderkey, l_linenumber, o_orderdate, c_name, n_name, s_name
        FROM lineitem
        JOIN orders ON l_orderkey = o_orderkey
        JOIN customer ON o_custkey = c_custkey
        JOIN nation ON c_nationkey = n_nationkey
        JOIN supplier ON l_suppkey = s_suppkey
        WHERE l_linenumber <= 3"""
    limit = 4_000_000
    assert sum(t.nbytes for t in tpch_tables.values()) > 30 * limit
    expected = _session(tpch_tables, tmp_path, limit=None, partitions=2).sql(sql).to_arrow()
    recorder = Recorder()
    run = _session(tpch_tables, tmp_path, limit=limit, partitions=2,
                   batch_size=8192).sql(sql).execute(observer=recorder)
    assert _sorted(run.result).equals(_sorted(expected))
    assert sum(_join_spill_counts(run)) > 0
    assert 0 < recorder.max_total <= limit
    assert run.ctx.memory_pool.reserved == 0
    assert list(tmp_path.iterdir()) == []


# -- differential against DuckDB: NULL keys, duplicates, multi-column and string keys -------

@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(11)

    def side(n, names):
        return pa.table({
            names[0]: _keys(rng, n, 1000, 0.05),  # a few rows per key: duplicates
            names[1]: pa.array([f"g{x}" for x in rng.integers(0, 3, n)],
                               mask=rng.random(n) < 0.05),
            names[2]: _keys(rng, n, 20_000, 0.05),  # mostly distinct
            names[3]: np.round(rng.random(n), 3)})

    return {"l": side(6000, ["a", "g", "u", "x"]), "r": side(4000, ["b", "h", "v", "y"])}


DIFFERENTIAL = [
    "SELECT a, g, x, b, h, y FROM l JOIN r ON a = b AND g = h",
    "SELECT a, x, y FROM l LEFT JOIN r ON a = b AND x < y",
    "SELECT a, x, b, y FROM l RIGHT JOIN r ON a = b AND g = h",
    "SELECT a, x, b, y FROM l FULL JOIN r ON a = b AND x + 0.5 > y",
    "SELECT a, g, x FROM l WHERE EXISTS (SELECT 1 FROM r WHERE a = b AND g = h)",
    "SELECT a, g, x FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE a = b AND x < y)",
    "SELECT u, x FROM l WHERE u NOT IN (SELECT v FROM r WHERE v IS NOT NULL)",
    "SELECT u, x FROM l WHERE u NOT IN (SELECT v FROM r)",  # a NULL: nothing is NOT IN
    "SELECT u, g FROM l INTERSECT SELECT v, h FROM r",
    "SELECT u, g FROM l EXCEPT SELECT v, h FROM r",
]


@pytest.mark.parametrize("partitions", [1, 2, 3])
@pytest.mark.parametrize("sql", DIFFERENTIAL)
def test_spilled_join_matches_duckdb(small, sql, partitions, tmp_path):
    s = _session(small, tmp_path, limit=60_000, partitions=partitions, batch_size=1000)
    run = s.sql(sql).execute()
    connection = duckdb.connect()
    for name, table in small.items():
        connection.register(name, table)
    expected = connection.sql(sql).to_arrow_table()
    assert_same(run.result, expected, ordered=False, sql=sql)
    assert sum(_join_spill_counts(run)) > 0
    assert list(tmp_path.iterdir()) == []


# -- failure, cancellation, a key that can not be split ------------------------------------

def _session_usable(s: ps.Session) -> bool:
    return s.sql("SELECT count(*) AS n FROM b WHERE k = 7").to_arrow().num_rows == 1


def test_one_giant_key_fails_with_resources_exhausted_naming_the_consumer(tmp_path):
    n = 150_000  # both sides several times the limit: whichever is built can not fit
    tables = {"p": pa.table({"k": np.ones(n, np.int64), "id": np.arange(n)}),
              "b": pa.table({"k": np.ones(n, np.int64), "s": [f"row{i:07d}" for i in range(n)]})}
    s = _session(tables, tmp_path, limit=500_000)
    with pytest.raises(ResourcesExhausted,
                       match=r"HashJoinExec\[\d\]: .* share one join key.*could not reserve"):
        s.sql("SELECT p.id, b.s FROM p JOIN b ON p.k = b.k").to_arrow()
    assert list(tmp_path.iterdir()) == []
    assert _session_usable(s)


def _fails_at(condition: str) -> str:
    return f"CAST(CASE WHEN {condition} THEN 'x' ELSE '1' END AS INTEGER)"


@pytest.mark.parametrize("sql", [
    # the last build row fails, after the build side started spilling
    "SELECT p.id, b.s FROM p JOIN b ON p.k = b.k WHERE " + _fails_at(
        f"b.s = 'n{BUILD_ROWS - 1:06d}'") + " = 1",
    # a row of the join's output fails, while buckets are being joined
    "SELECT p.id, b.s, " + _fails_at(f"p.id = {PROBE_ROWS // 2}") +
    " AS bad FROM p JOIN b ON p.k = b.k",
], ids=["building", "joining"])
def test_no_spill_file_remains_after_a_failure(tables, tmp_path, sql, monkeypatch):
    s = _session(tables, tmp_path)
    created = []  # unfinished spill files publish no event: note every file opened
    new_path = SpillManager._new_path
    monkeypatch.setattr(SpillManager, "_new_path",
                        lambda manager, metrics: created.append(new_path(manager, metrics))
                        or created[-1])
    with pytest.raises(ExecutionError, match="Could not convert"):
        s.sql(sql).execute()
    assert any("HashJoinExec" in path.name for path in created)
    assert not any(path.exists() for path in created)
    assert list(tmp_path.iterdir()) == []
    assert _session_usable(s)


@pytest.mark.parametrize("phase", ["writing", "reading"])  # building; joining buckets
def test_an_interrupt_while_spilling_cancels_and_cleans_up(tables, tmp_path, monkeypatch, phase):
    s = _session(tables, tmp_path, partitions=2)
    calls = []
    # observers run on their own thread: interrupt inside the engine
    if phase == "writing":
        finish = SpillWriter.finish

        def interrupting_finish(writer):
            calls.append(finish(writer))
            if len(calls) == 5:
                raise KeyboardInterrupt  # what a kernel interrupt looks like in the engine
            return calls[-1]

        monkeypatch.setattr(SpillWriter, "finish", interrupting_finish)
    else:
        read = SpillManager.read

        def interrupting_read(manager, file, metrics, delete=True):
            calls.append(file)
            if len(calls) == 5:
                raise KeyboardInterrupt
            yield from read(manager, file, metrics, delete)

        monkeypatch.setattr(SpillManager, "read", interrupting_read)

    with pytest.raises(Cancelled):
        s.sql(QUERIES["full_with_filter"][0]).execute()
    # the other probe partition may finish files of its own before it sees the cancellation
    assert len(calls) >= 5
    assert list(tmp_path.iterdir()) == []
    assert _session_usable(s)
