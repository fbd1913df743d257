"""Spill files: compressed Arrow IPC streams in the query's spill folder.

    operator ──writer().write(batch)…finish()──▶ SpillFile (lz4 IPC stream in ctx.spill_dir())
             ◀──────────read(file)────────────── batches; the file is deleted once read or closed

One ``SpillManager`` per query, created on first use (``spill_manager(ctx)``). Every file
written counts ``spill_count``, ``spilled_bytes`` (compressed size on disk) and
``spilled_rows`` on the writing operator's ``PartitionMetrics`` and publishes ``SpillWritten``;
reading one back publishes ``SpillRead``. Files are deleted as soon as they are read, when a
reader is closed early (cancellation closes generators), by ``SpillManager.close()``, and in any
case by ``ctx.cleanup()``, which removes the whole folder after success, error or cancel.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyarrow import ipc

from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.events import SpillRead, SpillWritten
from plansight.engine.exec.metrics import PartitionMetrics

#: Arrow IPC buffer compression of spill files. lz4 over zstd: zstd files are ~20% smaller,
#: but on the small batches a merge needs, zstd costs ~2x the time to write and to read.
COMPRESSION = "lz4"

_managers_lock = threading.Lock()


def spill_manager(ctx: TaskContext) -> SpillManager:
    """The query's SpillManager, created on first use and kept on ``ctx``."""
    manager = ctx.spill_manager
    if manager is None:
        with _managers_lock:
            manager = ctx.spill_manager
            if manager is None:
                manager = SpillManager(ctx)
                ctx.spill_manager = manager
    return manager


@dataclass
class SpillFile:
    """One finished spill file: where it is and what it holds."""

    path: Path
    schema: pa.Schema
    rows: int
    batches: int
    bytes: int


class SpillWriter:
    """Appends batches to one new spill file; ``finish()`` closes it and returns the SpillFile."""

    def __init__(self, manager: SpillManager, schema: pa.Schema, metrics: PartitionMetrics):
        self.manager, self.schema, self.metrics = manager, schema, metrics
        self.path = manager._new_path(metrics)
        self.rows = self.batches = 0
        self._sink = pa.OSFile(str(self.path), "wb")
        self._writer = ipc.new_stream(self._sink, schema,
                                      options=ipc.IpcWriteOptions(compression=COMPRESSION))

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._writer.write_batch(batch)
            self.rows += batch.num_rows
            self.batches += 1

    def write_table(self, table: pa.Table, max_rows: int) -> None:
        for batch in table.to_batches(max_chunksize=max(1, max_rows)):
            self.write(batch)

    def finish(self) -> SpillFile:
        self._writer.close()
        self._sink.close()
        size = os.path.getsize(self.path)
        file = SpillFile(self.path, self.schema, self.rows, self.batches, size)
        self.metrics.add("spill_count")
        self.metrics.add("spilled_bytes", size)
        self.metrics.add("spilled_rows", self.rows)
        with self.manager._lock:
            self.manager.history.append((self.metrics.operator, self.metrics.partition,
                                         self.rows, size))
        bus = self.manager.ctx.events
        if bus.active:
            bus.publish(SpillWritten(self.metrics.operator, self.rows, size, str(self.path),
                                     operator_id=self.metrics.operator_id,
                                     partition=self.metrics.partition))
        return file

    def abort(self) -> None:
        """Close and delete an unfinished file (error or cancellation)."""
        with contextlib.suppress(pa.ArrowException, OSError):
            self._writer.close()  # a half-written stream may not close cleanly; deleted anyway
        self._sink.close()
        self.manager.delete(self.path)


class SpillManager:
    """Creates, reads back and deletes the spill files of one query."""

    def __init__(self, ctx: TaskContext):
        self.ctx = ctx
        self._lock = threading.Lock()
        self._sequence = itertools.count()
        self._directory: Path | None = None
        self._live: set[Path] = set()
        # every file written, for QueryRun.spills: (operator, partition, rows, bytes)
        self.history: list[tuple[str, int, int, int]] = []

    def _new_path(self, metrics: PartitionMetrics) -> Path:
        with self._lock:
            if self._directory is None:
                self._directory = self.ctx.spill_dir()
            path = self._directory / (f"{metrics.operator}-{metrics.operator_id}-"
                                      f"p{metrics.partition}-{next(self._sequence)}.arrow")
            self._live.add(path)
        return path

    def writer(self, schema: pa.Schema, metrics: PartitionMetrics) -> SpillWriter:
        return SpillWriter(self, schema, metrics)

    def spill(self, batches: Iterable[pa.RecordBatch], schema: pa.Schema,
              metrics: PartitionMetrics, max_rows: int | None = None) -> SpillFile:
        """Write ``batches`` (re-chunked to at most ``max_rows`` rows) to one new file."""
        writer = self.writer(schema, metrics)
        try:
            for batch in batches:
                if max_rows is not None and batch.num_rows > max_rows:
                    for offset in range(0, batch.num_rows, max_rows):
                        writer.write(batch.slice(offset, max_rows))
                else:
                    writer.write(batch)
        except BaseException:
            writer.abort()
            raise
        return writer.finish()

    def read(self, file: SpillFile, metrics: PartitionMetrics,
             delete: bool = True) -> Iterator[pa.RecordBatch]:
        """The batches of ``file`` in written order, read one at a time; then delete it."""
        rows = 0
        try:
            with pa.OSFile(str(file.path), "rb") as source:
                reader = ipc.open_stream(source)
                while True:
                    self.ctx.check_cancelled()
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        break
                    rows += batch.num_rows
                    yield batch
        finally:
            if delete:
                self.delete(file.path)
            bus = self.ctx.events
            if bus.active:
                bus.publish(SpillRead(metrics.operator, rows, file.bytes, str(file.path),
                                      operator_id=metrics.operator_id,
                                      partition=metrics.partition))

    def delete(self, path: Path) -> None:
        with self._lock:
            self._live.discard(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def live_files(self) -> list[Path]:
        """Files written and not yet deleted."""
        with self._lock:
            return sorted(self._live)

    def close(self) -> None:
        """Delete every file still on disk."""
        for path in self.live_files():
            self.delete(path)
