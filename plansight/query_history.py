"""The queries this process ran: ``plansight.history()`` lists them, newest last, with what
a user compares between runs — when, how long, rows, peak memory, spills, how it ended —
and re-opens any query's frozen monitor (or its EXPLAIN ANALYZE when it ran unmonitored),
as Spark's SQL tab lists an application's queries.

The list is bounded (``MAX_QUERIES``) and holds nothing a run used: not its rows, plan,
context or session (a weak reference), only text and numbers — a history must never keep a
notebook's tables or hash tables alive.
"""

from __future__ import annotations

import html
import itertools
import threading
import weakref
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from plansight.engine.exec.memory_pool import format_bytes

MAX_QUERIES = 200  # records kept per process; the oldest go first

_SQL_SHOWN = 80  # characters of a query's text shown in the list (all of it on hover)


@dataclass
class QueryRecord:
    """One execution: what ran, how it ended and what it cost."""

    number: int  # 1, 2, ... in the order queries started in this process
    sql: str
    started: datetime
    status: str  # finished | failed | cancelled
    elapsed: float  # seconds
    rows: int | None  # result rows (None unless finished)
    peak_memory: int  # the memory pool's peak, bytes
    spills: int  # spill files written
    spilled_bytes: int
    error: str | None = None
    analyzed: str | None = field(default=None, repr=False)  # EXPLAIN ANALYZE of the run
    monitor_html: str | None = field(default=None, repr=False)  # the frozen monitor, if any
    session_ref: Any = field(default=None, repr=False)  # weakref to the Session

    def summary(self) -> str:
        """One line: ``#3 finished · 12 ms · 4 rows · peak 1.0 MiB · no spills``."""
        text = f"#{self.number} {self.status} · {self.elapsed * 1000:,.0f} ms"
        if self.rows is not None:
            text += f" · {self.rows:,} rows"
        text += f" · peak {format_bytes(self.peak_memory)}"
        text += (f" · {self.spills} spills ({format_bytes(self.spilled_bytes)})"
                 if self.spills else " · no spills")
        return text

    def _repr_html_(self) -> str:
        """The frozen monitor of this run (or its EXPLAIN ANALYZE) under its summary."""
        body = self.monitor_html
        if body is None:
            text = self.analyzed or self.error or ""
            body = f"<pre style='font-size:11px'>{html.escape(text)}</pre>"
        return (f"<div class='plansight-history-entry'><div><b>{html.escape(self.summary())}"
                f"</b></div><pre style='font-size:11px;white-space:pre-wrap'>"
                f"{html.escape(self.sql.strip())}</pre>{body}</div>")

    def __repr__(self) -> str:
        return f"<QueryRecord {self.summary()}: {_short(self.sql)}>"


class QueryHistory:
    """The queries run so far, oldest first; ``history[-1]`` is the latest.

    Shown in a notebook, it is a table with one row per query; each row opens to the
    query's frozen monitor.
    """

    def __init__(self, records: list[QueryRecord]):
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> QueryRecord:
        return self.records[index]

    def __iter__(self):
        return iter(self.records)

    def to_arrow(self):
        """The list as an Arrow table (one row per query) for querying or plotting."""
        import pyarrow as pa

        return pa.table({
            "number": pa.array([r.number for r in self.records], pa.int64()),
            "started": pa.array([r.started for r in self.records], pa.timestamp("us")),
            "status": pa.array([r.status for r in self.records], pa.string()),
            "elapsed_s": pa.array([r.elapsed for r in self.records], pa.float64()),
            "rows": pa.array([r.rows for r in self.records], pa.int64()),
            "peak_memory": pa.array([r.peak_memory for r in self.records], pa.int64()),
            "spills": pa.array([r.spills for r in self.records], pa.int64()),
            "spilled_bytes": pa.array([r.spilled_bytes for r in self.records], pa.int64()),
            "error": pa.array([r.error for r in self.records], pa.string()),
            "sql": pa.array([r.sql for r in self.records], pa.string()),
        })

    def __repr__(self) -> str:
        if not self.records:
            return "no queries yet"
        return "\n".join(f"{r.summary()}: {_short(r.sql)}" for r in self.records)

    def _repr_html_(self) -> str:
        if not self.records:
            return "<div class='plansight-history'>no queries yet</div>"
        colour = {"finished": "#2ca02c", "failed": "#d62728", "cancelled": "#ff7f0e"}
        rows = []
        for record in reversed(self.records):  # newest first, as a feed reads
            sql = " ".join(record.sql.split())
            rows.append(
                f"<details class='plansight-history-row' data-query='{record.number}'>"
                f"<summary><span style='color:{colour.get(record.status, '#888')}'>"
                f"{html.escape(record.summary())}</span> · {record.started:%H:%M:%S} · "
                f"<code title='{html.escape(sql)}'>{html.escape(_short(sql))}</code></summary>"
                f"{record._repr_html_()}</details>")
        return (f"<div class='plansight-history' style='font-size:12px'>"
                f"<div><b>{len(self.records)} queries</b> (newest first; open one for its "
                f"monitor)</div>{''.join(rows)}</div>")


def _short(sql: str) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= _SQL_SHOWN else text[:_SQL_SHOWN - 1] + "…"


_records: deque[QueryRecord] = deque(maxlen=MAX_QUERIES)
_lock = threading.Lock()
_numbers = itertools.count(1)


def record_run(session, sql: str, started: datetime, status: str, elapsed: float,
               peak_memory: int, spills: list, rows: int | None = None,
               analyzed: str | None = None, error: str | None = None) -> QueryRecord:
    """Add one execution to the history (Query.execute calls this however the run ends);
    ``spills`` are the run's spill files as (operator, partition, rows, bytes)."""
    record = QueryRecord(
        number=0, sql=sql, started=started, status=status, elapsed=elapsed, rows=rows,
        peak_memory=peak_memory, spills=len(spills),
        spilled_bytes=sum(spill[3] for spill in spills), error=error, analyzed=analyzed,
        session_ref=weakref.ref(session) if session is not None else None)
    with _lock:
        record.number = next(_numbers)
        _records.append(record)
    return record


def history(session=None) -> QueryHistory:
    """The queries this process ran (those of ``session`` only, when given), oldest first.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1, 2, 3]}))
        >>> _ = s.sql("SELECT x FROM t WHERE x > 1").to_arrow()
        >>> latest = ps.history(s)[-1]
        >>> latest.status, latest.rows, latest.sql
        ('finished', 2, 'SELECT x FROM t WHERE x > 1')
    """
    with _lock:
        records = list(_records)
    if session is not None:
        records = [r for r in records
                   if r.session_ref is not None and r.session_ref() is session]
    return QueryHistory(records)
