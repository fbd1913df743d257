"""Plans travel and tasks run without a Session: pickling, the version check, and
execute_task running every stage of a plan in this process (no cluster)."""

from __future__ import annotations

import pickle
import threading

import pyarrow as pa
import pytest

import plansight as ps
from plansight.datasets import TPCH_QUERIES, tpch
from plansight.engine.distributed import fragment
from plansight.engine.distributed.pieces import PieceStore, read_ipc
from plansight.engine.distributed.stage_filters import gather_key_summaries
from plansight.engine.distributed.stage_limits import final_limit
from plansight.engine.distributed.stages import plan_stages, stages_of
from plansight.engine.distributed.task import TaskSpec, environment, execute_task
from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.physical.plan import format_physical
from plansight.errors import Cancelled, ExecutionError
from tests.distributed.helpers import assert_equal_to_local


@pytest.fixture(scope="module")
def session():
    session = ps.Session(target_partitions=3, batch_size=2048)
    for name, table in tpch(0.01).items():
        session.register(name, table)
    return session


def run_in_process(query, query_id: str) -> pa.Table:
    """Every stage of ``query``'s staged plan through execute_task, one task at a time."""
    staged = plan_stages(query.physical)
    sources = fragment.memory_sources(staged)
    keys = {id(s): f"table-{i}" for i, s in enumerate(sources)}
    tables = {f"table-{i}": s for i, s in enumerate(sources)}
    where: dict[int, list[str]] = {}
    summaries: dict[int, dict] = {}
    try:
        for stage in stages_of(staged):
            payload = fragment.dumps(stage.plan, keys)
            spec = TaskSpec(query.config, query_id, stage.stage_id)
            filters = {i: summaries[i] for i in stage.after}
            results = [execute_task(payload, p, {i: where[i] for i in stage.inputs}, spec,
                                    tables, filters) for p in range(stage.tasks)]
            where[stage.stage_id] = [r.address for r in results]
            summaries[stage.stage_id] = gather_key_summaries(*results)
    finally:
        environment().end_query(query_id)
    assert query_id not in environment().store.queries()
    return pa.concat_tables([r.output for r in results]).rename_columns(query.column_names)


def planned_for_a_cluster(session, sql: str):
    """``sql`` planned as a cluster session plans it (probe partitions share no state across
    processes), yet run here: the sources are under ``cluster_min_rows``."""
    return session.sql(sql, options={"cluster": "tcp://127.0.0.1:9",
                                     "cluster_min_rows": 10**12})


@pytest.mark.parametrize("number", sorted(TPCH_QUERIES))
def test_stages_run_as_tasks_equal_local(session, number):
    query = planned_for_a_cluster(session, TPCH_QUERIES[number])
    assert_equal_to_local(run_in_process(query, f"q{number}"),
                          session.sql(TPCH_QUERIES[number]).to_arrow(), TPCH_QUERIES[number])


def test_a_plan_pickles_after_running_and_keeps_operator_ids(session):
    query = session.sql(TPCH_QUERIES[3])
    query.to_arrow()  # exchanges, shared builds and dynamic filters now hold run state
    again = pickle.loads(pickle.dumps(query.physical))
    assert [op.operator_id for _, op in again.walk()] == \
        [op.operator_id for _, op in query.physical.walk()]
    assert format_physical(again) == query.explain()
    ctx = TaskContext(query.config, MemoryPool())
    table = pa.Table.from_batches(
        [b for p in range(again.output_partitioning().count) for b in again.execute(p, ctx)],
        schema=again.schema)
    assert_equal_to_local(table.rename_columns(query.column_names), query.to_arrow())


def test_memory_tables_travel_by_reference():
    session = ps.Session(target_partitions=2)
    big = pa.table({"x": list(range(100_000))})
    session.register("t", big)
    plan = session.sql("SELECT sum(x) AS s FROM t").physical
    (source,) = fragment.memory_sources(plan)
    payload = fragment.dumps(plan, {id(source): "t"})
    assert len(payload) < 20_000 < big.nbytes
    assert fragment.loads(payload, {"t": source}).operator_id == plan.operator_id
    with pytest.raises(ExecutionError, match="did not receive table 't'"):
        fragment.loads(payload, {})
    with pytest.raises(ExecutionError, match="not shipped"):
        fragment.dumps(plan, {})


def test_a_plan_from_another_version_is_refused():
    session = ps.Session(target_partitions=1)
    plan = session.sql("SELECT 1 AS x").physical
    payload = fragment.dumps(plan)
    header = pickle.dumps({"format": fragment.PLAN_FORMAT, "version": "0.0.0-other"})
    forged = len(header).to_bytes(4, "little") + header + \
        payload[4 + int.from_bytes(payload[:4], "little"):]
    with pytest.raises(ExecutionError, match=r"plansight 0\.0\.0-other .*install the same"):
        fragment.loads(forged)
    assert fragment.loads(payload).operator_id == plan.operator_id


def test_a_cancelled_query_refuses_its_tasks(session):
    query = session.sql(TPCH_QUERIES[6])
    environment().cancel_query("cancelled-query")
    try:
        with pytest.raises(Cancelled):
            execute_task(query.physical, 0, {}, TaskSpec(query.config, "cancelled-query"))
        assert environment().running_tasks() == 0
    finally:
        environment().end_query("cancelled-query")


def test_errors_leave_a_task_as_plansight_errors():
    session = ps.Session(target_partitions=1)
    query = session.sql("SELECT CAST('abc' AS INTEGER) AS x")
    with pytest.raises(ps.errors.PlansightError) as local:
        query.to_arrow()
    with pytest.raises(type(local.value)) as remote:
        execute_task(fragment.dumps(query.physical), 0, {}, TaskSpec(query.config, "e"))
    assert pickle.loads(pickle.dumps(remote.value)).args == remote.value.args


def test_piece_store_spills_when_the_pool_refuses(tmp_path):
    store = PieceStore(MemoryPool(1000), str(tmp_path))
    batch = pa.record_batch({"x": pa.array(range(100), pa.int64())})  # 800 bytes
    key = ("q", 1, 0, 0)
    for _ in range(3):
        store.append(key, batch)
    store.finish(key)
    assert len(store.files()) == 1 and store.pool.reserved == 0
    assert sum(b.num_rows for b in store.batches(key)) == 300
    received = read_ipc(store.serialized(key))
    assert pa.Table.from_batches(received).equals(pa.Table.from_batches([batch] * 3))
    assert store.drop_query("q") == 1 and store.files() == []


def test_a_query_dropped_while_its_map_task_writes_leaves_nothing(tmp_path):
    """A cancel drops the query from the worker's event loop while a map task still appends
    (on disk: the pool holds nothing): no write on a closed file, no file left behind."""
    store = PieceStore(MemoryPool(0), str(tmp_path))
    batch = pa.record_batch({"x": pa.array(range(100), pa.int64())})
    errors: list = []

    def write():
        try:
            for i in range(2000):
                store.append(("q", 1, 0, i % 4), batch)
        except BaseException as error:  # noqa: BLE001 (the test reports it)
            errors.append(error)

    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive():
        store.drop_query("q")
    writer.join()
    store.drop_query("q")  # as execute_task's finally does after a cancel
    assert errors == [] and store.files() == [] and store.pool.reserved == 0


def test_pieces_read_off_the_wire_are_aligned():
    table = pa.table({"d": pa.array([1, 2, 3], pa.decimal128(20, 2))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data = b"x" + sink.getvalue().to_pybytes()  # one byte off: every buffer misaligned
    (batch,) = read_ipc(memoryview(data)[1:])
    assert all(b is None or b.address % 16 == 0 for b in batch.column(0).buffers())
    assert batch.column(0).to_pylist() == table.column(0).to_pylist()


def test_the_tasks_below_a_final_limit_stop_at_its_rows():
    session = ps.Session(target_partitions=3, batch_size=7)
    session.register("t", pa.table({"x": pa.array(range(1000), pa.int64())}))
    query = session.sql("SELECT x FROM t WHERE x % 3 <> 1 LIMIT 10 OFFSET 4")
    staged = plan_stages(query.physical)
    limit = final_limit(staged)
    assert limit is not None and limit.rows == 14 and limit.ordered
    (writer,) = [op for _, op in staged.walk() if op.name == "ShuffleWriterExec"]
    assert writer.fetch == 14 and "fetch=14" in writer.display()
    assert run_in_process(query, "limited").equals(query.to_arrow())
    result = execute_task(writer, 1, {}, TaskSpec(query.config, "w", 1))
    try:
        assert result.rows == 14  # of the 222 rows of partition 1 that pass
    finally:
        environment().end_query("w")


def test_a_cancelled_stage_refuses_its_tasks_and_keeps_the_others_pieces():
    env = environment()
    store = env.store
    batch = pa.record_batch({"x": pa.array(range(10), pa.int64())})
    store.append(("s", 1, 0, 0), batch)
    store.append(("s", 2, 0, 0), batch)
    try:
        assert env.cancel_stage("s", 2) == 0
        assert env.start_task("s", 2).is_set() and not env.start_task("s", 1).is_set()
        assert store.drop_task("s", 2, 0) == 1
        assert list(store.batches(("s", 1, 0, 0))) == [batch]
        assert list(store.batches(("s", 2, 0, 0))) == []
    finally:
        for flag in list(env._running.get("s", {})):
            env.end_task("s", flag)
        env.end_query("s")
    assert env.running_tasks() == 0 and not env.start_task("s", 2).is_set()
    env.end_query("s")


def test_a_query_ended_while_its_tasks_ran_is_forgotten_with_its_last_task():
    """A cancelled query whose tasks still unwind at its end is refused until they finish,
    then forgotten: a long-lived worker kept every such query's cancel entries."""
    env = environment()
    running = env.start_task("late", 1)
    env.cancel_query("late")
    env.cancel_stage("late", 1)
    env.end_query("late")
    assert running.is_set() and env.start_task("late", 2).is_set()  # still refused
    for flag in list(env._running.get("late", {})):
        env.end_task("late", flag)
    assert "late" not in env._cancelled and "late" not in env._ended
    assert not any(query == "late" for query, _ in env._cancelled_stages)


def test_a_result_made_of_slices_travels_in_its_own_size():
    session = ps.Session(target_partitions=1, batch_size=1000)
    session.register("t", pa.table({"x": pa.array(range(100_000), pa.int64())}))
    query = session.sql("SELECT x FROM t WHERE x < 2000")
    result = execute_task(query.physical, 0, {}, TaskSpec(query.config, "sliced"))
    assert result.output.num_rows == 2000
    assert len(pickle.dumps(result.output, protocol=4)) < 2 * 2000 * 8 + 10_000
