"""The piece store: map tasks' shuffle output, kept on the worker that made it.

    map task (stage s, partition m) ──append((q, s, m, r), batch)──▶ piece (q, s, m, r)
    reduce task r, same process ──────batches(key)──────────────────▶ the batches themselves
    reduce task r, another worker ──serialized(key) over the wire──▶ one Arrow IPC stream

One store per worker process, shared by every task there. Pieces are held in memory under a
spillable reservation of the worker's pool; when the pool refuses a batch, that piece moves
to an IPC file in the store's folder and later batches are appended there. ``drop_query``
deletes a query's pieces (memory and files) when it ends, fails or is cancelled.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyarrow import ipc

from plansight.engine.exec.alignment import ALIGNED_READ
from plansight.engine.exec.memory_pool import MemoryPool

#: (query id, stage id, map partition, output partition)
PieceKey = tuple[str, int, int, int]


class _Piece:
    def __init__(self, schema: pa.Schema):
        self.schema = schema
        # a map task appends on its thread while a cancel may drop the query from the
        # worker's event loop: closing a file mid-write could hit a reused descriptor
        self.lock = threading.Lock()
        self.dropped = False
        self.batches: list[pa.RecordBatch] = []
        self.path: Path | None = None
        self.writer: ipc.RecordBatchStreamWriter | None = None
        self.sink = None
        self.rows = 0
        self.bytes = 0

    def close_file(self) -> None:
        """Close the piece's file, if it has one open (holding ``lock``)."""
        if self.writer is not None:
            self.writer.close()
            self.sink.close()
            self.writer = self.sink = None


class PieceStore:
    """Shuffle pieces of every query running on this process."""

    def __init__(self, pool: MemoryPool, directory: str | None = None):
        self.pool = pool
        self._base = directory
        self._dir: Path | None = None
        self._pieces: dict[PieceKey, _Piece] = {}
        self._reservations: dict[str, object] = {}
        self._lock = threading.Lock()

    def directory(self) -> Path:
        with self._lock:
            if self._dir is None:
                if self._base:
                    Path(self._base).mkdir(parents=True, exist_ok=True)
                self._dir = Path(tempfile.mkdtemp(prefix="plansight-pieces-", dir=self._base))
            return self._dir

    def _reservation(self, query_id: str):
        with self._lock:
            reservation = self._reservations.get(query_id)
            if reservation is None:
                reservation = self._reservations[query_id] = self.pool.register(
                    f"ShuffleWriterExec[{query_id}]", can_spill=True)
            return reservation

    def append(self, key: PieceKey, batch: pa.RecordBatch) -> None:
        """Add ``batch`` to piece ``key`` (kept in memory while the pool grants it)."""
        with self._lock:
            piece = self._pieces.get(key)
            if piece is None:
                piece = self._pieces[key] = _Piece(batch.schema)
        with piece.lock:
            if piece.dropped:  # the query was dropped (cancelled) while this task ran
                return
            piece.rows += batch.num_rows
            piece.bytes += batch.nbytes
            if piece.path is None and self._reservation(key[0]).try_grow(batch.nbytes):
                piece.batches.append(batch)
                return
            if piece.path is None:  # refused: this piece goes to disk, what it held too
                piece.path = self.directory() / ("-".join(map(str, key)) + ".arrow")
                piece.sink = pa.OSFile(str(piece.path), "wb")
                piece.writer = ipc.new_stream(piece.sink, piece.schema)
                held, piece.batches = piece.batches, []
                for old in held:
                    piece.writer.write_batch(old)
                self._reservation(key[0]).shrink(sum(b.nbytes for b in held))
            piece.writer.write_batch(batch)

    def finish(self, key: PieceKey) -> None:
        """Close piece ``key``'s file, if it has one (its map task is done)."""
        piece = self._pieces.get(key)
        if piece is not None:
            with piece.lock:
                piece.close_file()

    def batches(self, key: PieceKey) -> Iterator[pa.RecordBatch]:
        """The batches of piece ``key`` (none when the map task sent it no rows)."""
        piece = self._pieces.get(key)
        if piece is None:
            return
        if piece.path is not None:
            with pa.memory_map(str(piece.path)) as source:
                yield from ipc.open_stream(source, options=ALIGNED_READ)
            return
        yield from piece.batches

    def serialized(self, key: PieceKey) -> bytes | None:
        """Piece ``key`` as one Arrow IPC stream (None when it has no rows)."""
        piece = self._pieces.get(key)
        if piece is None:
            return None
        if piece.path is not None:
            return piece.path.read_bytes()
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, piece.schema) as writer:
            for batch in piece.batches:
                writer.write_batch(batch)
        return sink.getvalue().to_pybytes()

    def drop_query(self, query_id: str) -> int:
        """Delete every piece of ``query_id`` (memory and files); the number deleted."""
        with self._lock:
            keys = [key for key in self._pieces if key[0] == query_id]
            pieces = [self._pieces.pop(key) for key in keys]
            reservation = self._reservations.pop(query_id, None)
        for piece in pieces:
            with piece.lock:
                piece.dropped = True
                piece.close_file()
                if piece.path is not None:
                    piece.path.unlink(missing_ok=True)
        if reservation is not None:
            reservation.free()
        return len(pieces)

    def drop_task(self, query_id: str, stage_id: int, partition: int) -> int:
        """Delete the pieces one map task wrote (it was cancelled or failed: nothing will
        read them); the number deleted."""
        with self._lock:
            keys = [key for key in self._pieces if key[:3] == (query_id, stage_id, partition)]
            pieces = [self._pieces.pop(key) for key in keys]
            reservation = self._reservations.get(query_id)
        for piece in pieces:
            with piece.lock:
                piece.dropped = True
                held = sum(b.nbytes for b in piece.batches)
                piece.batches = []
                piece.close_file()
                if piece.path is not None:
                    piece.path.unlink(missing_ok=True)
            if reservation is not None and held:
                reservation.shrink(held)
        return len(pieces)

    def queries(self) -> set[str]:
        with self._lock:
            return {key[0] for key in self._pieces}

    def files(self) -> list[Path]:
        """Piece files on disk now (empty once every query is dropped)."""
        with self._lock:
            directory = self._dir
        return sorted(directory.iterdir()) if directory is not None and directory.exists() \
            else []

    def close(self) -> None:
        for query_id in self.queries():
            self.drop_query(query_id)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def read_ipc(data) -> list[pa.RecordBatch]:
    """The batches of an IPC stream (bytes off the wire or a mapped file), realigned.

    Bytes off a socket sit wherever the comm put them, and IPC pads buffers to 8 bytes only;
    Arrow's compute (Acero) warns about, and copies, every buffer not aligned for its type
    (16 bytes for a decimal). The reader copies just those buffers, once, here.
    """
    return list(ipc.open_stream(data, options=ALIGNED_READ))
