"""SpillManager: compressed IPC files in the query's spill folder, counted and deleted."""

from __future__ import annotations

import pyarrow as pa
import pytest

from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import EventBus, SpillRead, SpillWritten
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.exec.spill import spill_manager
from plansight.errors import Cancelled


def _ctx(tmp_path, events=None) -> TaskContext:
    bus = EventBus([events.append] if events is not None else [])
    return TaskContext(SessionConfig(spill_dir=str(tmp_path)), MemoryPool(None), events=bus)


def _batches():
    return [pa.record_batch({"k": list(range(i, i + 100)), "s": [str(j) for j in range(100)]})
            for i in range(0, 500, 100)]


def test_round_trip_counts_and_deletes(tmp_path):
    events = []
    ctx = _ctx(tmp_path, events)
    metrics = ctx.metrics.for_partition(7, "SortExec", 2)
    manager = spill_manager(ctx)
    assert spill_manager(ctx) is manager
    file = manager.spill(_batches(), _batches()[0].schema, metrics, max_rows=64)
    assert file.path.exists() and file.rows == 500 and file.batches == 10
    assert (metrics["spill_count"], metrics["spilled_rows"]) == (1, 500)
    assert metrics["spilled_bytes"] == file.bytes > 0
    back = list(manager.read(file, metrics))
    assert pa.Table.from_batches(back).equals(pa.Table.from_batches(_batches()))
    assert not file.path.exists() and manager.live_files() == []
    ctx.events.close()  # delivered on the bus's thread: wait for it, as Query.execute does
    written = [e for e in events if isinstance(e, SpillWritten)]
    read = [e for e in events if isinstance(e, SpillRead)]
    assert [(e.operator, e.operator_id, e.partition, e.rows) for e in written] == \
        [("SortExec", 7, 2, 500)]
    assert read[0].rows == 500 and read[0].path == written[0].path
    ctx.cleanup()
    assert list(tmp_path.iterdir()) == []


def test_a_reader_closed_early_deletes_its_file(tmp_path):
    ctx = _ctx(tmp_path)
    metrics = ctx.metrics.for_partition(1, "SortExec", 0)
    manager = spill_manager(ctx)
    file = manager.spill(_batches(), _batches()[0].schema, metrics)
    reader = manager.read(file, metrics)
    next(reader)
    reader.close()
    assert not file.path.exists()


def test_cancel_stops_reading_and_cleanup_removes_unread_files(tmp_path):
    ctx = _ctx(tmp_path)
    metrics = ctx.metrics.for_partition(1, "SortExec", 0)
    manager = spill_manager(ctx)
    files = [manager.spill(_batches(), _batches()[0].schema, metrics) for _ in range(3)]
    writer = manager.writer(_batches()[0].schema, metrics)  # an unfinished file
    writer.write(_batches()[0])
    reader = manager.read(files[0], metrics)
    next(reader)
    ctx.cancelled.set()
    with pytest.raises(Cancelled):
        next(reader)
    assert len(manager.live_files()) == 3
    ctx.cleanup()
    assert list(tmp_path.iterdir()) == []


def test_close_deletes_live_files_and_abort_deletes_a_partial_file(tmp_path):
    ctx = _ctx(tmp_path)
    metrics = ctx.metrics.for_partition(1, "RepartitionExec", 0)
    manager = spill_manager(ctx)
    writer = manager.writer(_batches()[0].schema, metrics)
    writer.write(_batches()[0])
    writer.abort()
    assert not writer.path.exists() and metrics["spill_count"] == 0
    manager.spill(_batches(), _batches()[0].schema, metrics)
    manager.close()
    assert manager.live_files() == [] and list(ctx.spill_dir().iterdir()) == []
    ctx.cleanup()
