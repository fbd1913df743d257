"""Spilling at the issue's scale: a 32 MB memory limit against 500 MB of generated input.

The other tests in tests/spill/ use a few MB of data; bugs that only show when runs, buckets
and merge levels are many (a reservation that grows with the input, a spill file read twice,
memory the pool never sees) need the real ratio. Each query runs twice, each time in a fresh
process over the same Parquet file (read by row group): once under the limit, once without
one. The worker streams the result into a digest instead of keeping it, so its peak RSS is
what the engine held. Checked per query:

- the same rows: row count and a digest of every output column (order-sensitive for ORDER BY,
  a multiset digest otherwise);
- it spilled (spill metrics > 0), the unlimited run did not;
- the pool's reserved total never exceeded the limit, from the ReservationChanged events;
- every reservation released and no spill file left, in the query's folder or beside it;
- the peak RSS growth (VmHWM minus the RSS before the query) stays below half the unlimited
  run's: memory the pool does not see must not grow with the input either.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

LIMIT = "32MB"
INPUT_BYTES = 500 * 2**20  # Arrow bytes of the generated table, at least
PARTITIONS = 2
# rows per batch and per Parquet row group (the scan's unit, ~2 MB): small against the limit,
# since what the scan holds (a row group read and decoded per partition) is outside the pool
BATCH_SIZE = ROW_GROUP = 16384
GROUPS = 1_000_000  # distinct g (~4 rows each)
WINDOW_PARTITIONS = 100_000  # window partitions (~40 rows each)

SCHEMA = pa.schema([("k", pa.int64()), ("g", pa.int64()), ("p", pa.int64()),
                    ("v", pa.float64()), ("s", pa.string())])

# the queries, by name; only ORDER BY specifies the order of the rows
CASES = {
    # wide rows (a ~100-byte string), NULLs among the keys, ties broken by the unique k
    "sort": "SELECT k, g, v, s FROM t ORDER BY v DESC NULLS LAST, k",
    # ~1M groups whose state (a ~100-byte max(s) each) alone is 4x the limit
    "aggregate": ("SELECT g, count(*) AS n, count(v) AS c, sum(v) AS total, min(v) AS lo, "
                  "max(s) AS top FROM t GROUP BY g"),
    # the build side (half the rows with their strings, ~250 MB) is 8x the limit
    "join": ("SELECT a.k, a.v, b.s FROM t AS a JOIN (SELECT k, s FROM t WHERE g % 2 = 0) AS b "
             "ON a.k = b.k"),
    # 100K partitions: a running frame and whole-partition aggregates over the wide rows
    "window": ("SELECT k, p, s, sum(v) OVER (PARTITION BY p ORDER BY k ROWS UNBOUNDED "
               "PRECEDING) AS running, count(*) OVER (PARTITION BY p) AS n, "
               "max(v) OVER (PARTITION BY p) AS top FROM t"),
}
ORDERED = {"sort"}


# ---------------------------------------------------------------------------- input


def generate(path: Path, min_bytes: int = INPUT_BYTES, chunk: int = 1 << 18) -> int:
    """Write ``(k, g, p, v, s)`` to Parquet in chunks until at least ``min_bytes`` Arrow
    bytes; return the Arrow bytes written. Deterministic: chunk ``i`` draws from seed ``i``.

    ``k`` is unique (an odd multiplier is a bijection modulo 2**40), ``v`` a multiple of 1/4
    with 2% NULLs (every sum is exact in any order, so spilled and unspilled runs agree to
    the bit), ``s`` 60-139 random letters.
    """
    written, start = 0, 0
    with pq.ParquetWriter(path, SCHEMA, compression="none") as writer:
        while written < min_bytes:
            rng = np.random.default_rng(start // chunk)
            rows = np.arange(start, start + chunk, dtype=np.uint64)
            k = ((rows * np.uint64(0x9E3779B97F4A7C15)) & np.uint64((1 << 40) - 1))
            lengths = rng.integers(60, 140, chunk)
            offsets = np.zeros(chunk + 1, np.int32)
            np.cumsum(lengths, out=offsets[1:])
            letters = rng.integers(ord("a"), ord("z") + 1, int(offsets[-1]), dtype=np.uint8)
            table = pa.table([
                k.astype(np.int64),
                rng.integers(0, GROUPS, chunk),
                rng.integers(0, WINDOW_PARTITIONS, chunk),
                pa.array(rng.integers(-4000, 4000, chunk) / 4, mask=rng.random(chunk) < 0.02),
                pa.StringArray.from_buffers(chunk, pa.py_buffer(offsets), pa.py_buffer(letters)),
            ], schema=SCHEMA)
            writer.write_table(table, row_group_size=ROW_GROUP)
            written += table.nbytes
            start += chunk
    return written


# ---------------------------------------------------------------------------- digest

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_NULL = np.uint64(0x5BD1E9955BD1E995)
_SLICE = 8192  # rows digested at a time: the temporaries stay a few MB


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit flips about half the output bits."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _string_words(array: pa.Array) -> np.ndarray:
    """A uint64 per string: its bytes weighted by position-dependent words, summed (one
    cumulative sum over the batch's bytes, differenced at the offsets), mixed with its length."""
    offsets = np.frombuffer(array.buffers()[1], np.int32)[
        array.offset:array.offset + len(array) + 1].astype(np.int64)
    data = array.buffers()[2]
    data = np.frombuffer(data, np.uint8)[offsets[0]:offsets[-1]] if data is not None else \
        np.zeros(0, np.uint8)
    offsets -= offsets[0]
    lengths = np.diff(offsets)
    position = np.arange(len(data)) - np.repeat(offsets[:-1], lengths)
    sums = np.zeros(len(data) + 1, np.uint64)
    np.cumsum(data * _mix(position.astype(np.uint64) + np.uint64(1)), out=sums[1:])
    return _mix((sums[offsets[1:]] - sums[offsets[:-1]]) ^ lengths.astype(np.uint64))


def _words(array: pa.Array) -> np.ndarray:
    """A uint64 per value that determines it (NULL has its own word)."""
    if pa.types.is_string(array.type):
        words = _string_words(array)
    elif pa.types.is_floating(array.type):
        words = (array.fill_null(0).to_numpy() + 0.0).view(np.uint64)  # -0.0 is 0.0
    else:
        words = array.cast(pa.int64()).fill_null(0).to_numpy().view(np.uint64)
    if array.null_count:
        words = np.where(array.is_null().to_numpy(zero_copy_only=False), _NULL, words)
    return words


class Digest:
    """Row count, the wrapping sum of the row hashes (equal for equal multisets of rows) and
    a hash of their sequence (equal only in the same order); batch boundaries do not matter."""

    def __init__(self):
        self.rows = 0
        self.unordered = np.zeros(1, np.uint64)  # an array: its sums wrap without a warning
        self.ordered = hashlib.blake2b(digest_size=16)

    def update(self, batch: pa.RecordBatch) -> None:
        for start in range(0, batch.num_rows, _SLICE):
            part = batch.slice(start, _SLICE)
            h = np.full(part.num_rows, np.uint64(0x9E3779B97F4A7C15))
            for position, column in enumerate(part.columns):
                h = _mix(h ^ (_words(column) + np.uint64(position)))
            self.rows += part.num_rows
            self.unordered += h.sum(dtype=np.uint64)
            self.ordered.update(h.tobytes())

    def result(self) -> dict:
        return {"rows": self.rows, "unordered": int(self.unordered[0]),
                "ordered": self.ordered.hexdigest()}


# ---------------------------------------------------------------------------- worker


def _current_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak_rss() -> None:
    """Start the peak RSS over from the current RSS (Linux 4.0+; without it, the peak since
    the process started). Not ru_maxrss: across exec it keeps the parent's peak, so a worker
    of a large pytest process reported that process's RSS as its own."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss() -> int:
    """The process's peak RSS (VmHWM: this process image's own, unlike ru_maxrss)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def run_query(path: str, sql: str, limit: str | None, spill_dir: str) -> dict:
    """Run ``sql`` as Query.execute does, digesting the batches instead of keeping them."""
    import plansight as ps
    from plansight.engine.exec.context import TaskContext
    from plansight.engine.exec.events import EventBus, ReservationChanged, SpillWritten
    from plansight.engine.exec.memory_pool import MemoryPool

    session = ps.Session(target_partitions=PARTITIONS, memory_limit=limit or "1TB",
                         batch_size=BATCH_SIZE, spill_dir=spill_dir)
    session.register_parquet("t", path)
    query = session.sql(sql)
    seen = {"max_total": 0, "spill_events": 0}

    def observer(event) -> None:
        if isinstance(event, ReservationChanged):
            # a lagging observer sees only each consumer's latest change; pool_peak is exact
            seen["max_total"] = max(seen["max_total"], event.pool_total, event.pool_peak)
        elif isinstance(event, SpillWritten):
            seen["spill_events"] += 1

    pool = MemoryPool(query.config.memory_limit, query.config.memory_pool_policy)
    bus = EventBus([observer])
    pool.listeners.append(lambda r, total: bus.publish(
        ReservationChanged(r.consumer, r.size, total, pool.peak)))
    ctx = TaskContext(query.config, pool, events=bus)
    digest, plan = Digest(), query.physical
    _reset_peak_rss()
    base, start, start_cpu = _current_rss(), time.perf_counter(), time.process_time()
    try:
        for partition in range(plan.output_partitioning().count):
            for batch in plan.execute(partition, ctx):
                digest.update(batch)
        # operators delete their files once read, not only at the query's end
        folder = ctx._spill_dir  # None when nothing spilled
        left = sorted(p.name for p in folder.iterdir()) if folder is not None else []
    finally:
        ctx.cleanup()
        bus.close()
    peak = _peak_rss()
    metrics = {name: 0 for name in ("spill_count", "spilled_bytes", "spilled_rows")}
    for totals in ctx.metrics.snapshot().values():
        for name in metrics:
            metrics[name] += int(totals.get(name, 0))
    return {**digest.result(), **seen, **metrics, "left_behind": left,
            "pool_peak": pool.peak, "reserved_after": pool.reserved,
            "rss_growth": peak - base, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - start_cpu}


def _in_subprocesses(path: Path, sql: str, runs: dict[str, str | None],
                     tmp_path: Path) -> dict[str, dict]:
    """``run_query`` for each memory limit of ``runs`` (name: limit), each in its own worker
    process, all at once: separate processes, so each peak RSS is its own."""
    workers = {}
    for name, limit in runs.items():
        spill_dir = tmp_path / name
        spill_dir.mkdir()
        request = json.dumps({"path": str(path), "sql": sql, "limit": limit,
                              "spill_dir": str(spill_dir)})
        workers[name] = subprocess.Popen([sys.executable, __file__, request], text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = {}
    for name, worker in workers.items():
        out, err = worker.communicate(timeout=900)
        assert worker.returncode == 0, f"{name} run failed:\n{err[-4000:]}"
        results[name] = json.loads(out.splitlines()[-1])
    return results


# ---------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("scale") / "t.parquet"
    assert generate(path) >= INPUT_BYTES
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_spilled_result_matches_the_unlimited_run(data, tmp_path, name):
    from plansight.engine.exec.memory_pool import parse_memory_limit

    sql = CASES[name]
    runs = _in_subprocesses(data, sql, {"limited": LIMIT, "unlimited": None}, tmp_path)
    limited, unlimited = runs["limited"], runs["unlimited"]
    report = {key: limited[key] for key in ("rss_growth", "pool_peak", "spilled_bytes",
                                            "cpu_seconds", "seconds")}
    print(f"{name}: limited {report}, unlimited rss_growth={unlimited['rss_growth']} "
          f"pool_peak={unlimited['pool_peak']} cpu_seconds={unlimited['cpu_seconds']:.1f}")

    assert limited["rows"] == unlimited["rows"] > 0
    assert limited["unordered"] == unlimited["unordered"]
    if name in ORDERED:
        assert limited["ordered"] == unlimited["ordered"]

    assert limited["spill_count"] > 0 and limited["spilled_bytes"] > 0
    assert limited["spill_events"] > 0
    assert unlimited["spill_count"] == 0
    assert 0 < limited["max_total"] <= parse_memory_limit(LIMIT)
    assert limited["pool_peak"] <= parse_memory_limit(LIMIT)
    assert unlimited["pool_peak"] > parse_memory_limit(LIMIT)  # the limit did bind

    assert limited["reserved_after"] == unlimited["reserved_after"] == 0
    assert limited["left_behind"] == []
    assert list((tmp_path / "limited").iterdir()) == []

    assert limited["rss_growth"] < unlimited["rss_growth"] / 2


if __name__ == "__main__":  # the worker: one query, its summary as JSON on stdout
    print(json.dumps(run_query(**json.loads(sys.argv[1]))))
