"""Compare two runs side by side, per operator: the same SQL under two settings, or two SQLs.

Operators are matched along the two plans in EXPLAIN order by name (a longest-common-
subsequence alignment), so an operator that exists in one plan only — a RepartitionExec
inserted for 4 partitions but not for 1 — gets a row with the other side empty:

    operator                    partitions  rows            wall ms        B/A
    AggregateExec #1            1 | 4       100 | 100       9.1 | 4.0      0.44
    RepartitionExec #2          - | 4       - | 400         - | 3.2
    DataSourceExec #3           1 | 4       10,000 | ...    ...
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from plansight.engine.exec.memory_pool import format_bytes

COLUMNS = ("partitions", "output_rows", "output_batches", "wall_ms", "compute_ms", "peak_mem",
           "spill_count", "spilled_bytes")


def operator_stats(run) -> list[dict[str, Any]]:
    """Per-operator numbers of one QueryRun (or Profile), in EXPLAIN order.

    ``wall_ms`` spans the first partition start to the last partition end; ``compute_ms`` is
    the operator's own compute time (children excluded where it is measured; see compute_clock).
    """
    from plansight.profiling.timeline import plan_operators

    run = getattr(run, "run", run)  # a Profile holds its QueryRun
    metrics = run.ctx.metrics
    rows = []
    for op in plan_operators(run.plan):
        partitions = metrics.partitions(op.operator_id)
        starts = [m.start for m in partitions if m.start is not None]
        ends = [m.end for m in partitions if m.end is not None]
        own = metrics.total(op.operator_id, "elapsed_compute")  # children already excluded
        rows.append({
            "operator_id": op.operator_id, "operator": op.name, "display": op.display(),
            "partitions": len(partitions),
            "output_rows": int(metrics.total(op.operator_id, "output_rows")),
            "output_batches": int(metrics.total(op.operator_id, "output_batches")),
            "wall_ms": (max(ends) - min(starts)) * 1000 if starts and ends else 0.0,
            "compute_ms": max(own, 0.0) * 1000,
            "peak_mem": int(metrics.total(op.operator_id, "peak_mem")),
            "spill_count": int(metrics.total(op.operator_id, "spill_count")),
            "spilled_bytes": int(metrics.total(op.operator_id, "spilled_bytes")),
        })
    return rows


@dataclass
class Comparison:
    """Rows of ``{"operator", "a", "b"}`` (``a``/``b``: operator_stats dicts or None)."""

    labels: tuple[str, str]
    rows: list[dict[str, Any]]
    elapsed: tuple[float, float]
    runs: tuple[Any, Any] = field(default=(None, None), repr=False)

    def _cells(self) -> list[list[str]]:
        table = []
        for row in self.rows:
            a, b = row["a"], row["b"]

            def pair(name, fmt, a=a, b=b):
                return " | ".join("-" if side is None else fmt(side[name]) for side in (a, b))

            ratio = ""
            if a is not None and b is not None and a["wall_ms"] > 0:
                ratio = f"{b['wall_ms'] / a['wall_ms']:.2f}"
            table.append([row["operator"], pair("partitions", str),
                          pair("output_rows", lambda v: f"{v:,}"),
                          pair("wall_ms", lambda v: f"{v:.1f}"), ratio,
                          pair("compute_ms", lambda v: f"{v:.1f}"),
                          pair("peak_mem", format_bytes), pair("spill_count", str)])
        return table

    _HEADER = ("operator", "partitions", "output rows", "wall ms", "B/A", "compute ms",
               "peak mem", "spills")

    def __str__(self) -> str:
        cells = [list(self._HEADER)] + self._cells()
        widths = [max(len(r[i]) for r in cells) for i in range(len(self._HEADER))]
        elapsed = f"{self.elapsed[0] * 1000:.1f} ms | {self.elapsed[1] * 1000:.1f} ms"
        lines = [f"A = {self.labels[0]}", f"B = {self.labels[1]}", f"query elapsed: {elapsed}"]
        for i, row in enumerate(cells):
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th style='text-align:left'>{esc(h)}</th>" for h in self._HEADER)
        body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{esc(c)}</td>"
                                        for c in row) + "</tr>" for row in self._cells())
        return (f"<div class='plansight-compare' style='font-size:12px'>"
                f"<div><b>A</b> = {esc(self.labels[0])}<br><b>B</b> = {esc(self.labels[1])}"
                f"<br>query elapsed: {self.elapsed[0] * 1000:.1f} ms | "
                f"{self.elapsed[1] * 1000:.1f} ms (each cell: A | B)</div>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def compare(a, b, labels: tuple[str, str] | None = None) -> Comparison:
    """Align two runs' operators and put their metrics side by side.

    Args:
        a, b: QueryRun or Profile objects.
        labels: Names of the two runs (default: the Profiles' labels, else "A" and "B").

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"k": [1, 2, 1], "v": [1, 2, 3]}))
        >>> q = "SELECT k, sum(v) AS s FROM t GROUP BY k"
        >>> c = compare(s.sql(q).execute(), s.sql(q).execute(), labels=("first", "second"))
        >>> print(str(c).splitlines()[0:2])
        ['A = first', 'B = second']
        >>> [(row["a"]["output_rows"], row["b"]["output_rows"]) for row in c.rows][-1]
        (3, 3)
    """
    if labels is None:
        labels = (getattr(a, "label", "") or "A", getattr(b, "label", "") or "B")
    stats_a, stats_b = operator_stats(a), operator_stats(b)
    names_a = [s["operator"] for s in stats_a]
    names_b = [s["operator"] for s in stats_b]
    rows: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(None, names_a, names_b, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            rows += [_row(x, y) for x, y in zip(stats_a[a0:a1], stats_b[b0:b1])]
        else:
            rows += [_row(x, None) for x in stats_a[a0:a1]]
            rows += [_row(None, y) for y in stats_b[b0:b1]]
    elapsed = tuple(getattr(getattr(r, "run", r), "elapsed", 0.0) for r in (a, b))
    return Comparison(tuple(labels), rows, elapsed, (a, b))


def compare_settings(session, sql: str, a: Mapping[str, Any], b: Mapping[str, Any],
                     profile: bool = True) -> Comparison:
    """Run ``sql`` under session options ``a`` and then ``b``; compare per operator.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.Table.from_batches(
        ...     pa.table({"k": list(range(100)) * 10}).to_batches(max_chunksize=100)))
        >>> c = compare_settings(s, "SELECT k, count(*) AS n FROM t GROUP BY k",
        ...                      {"target_partitions": 1}, {"target_partitions": 4})
        >>> c.labels, s.get_option("target_partitions")
        (('target_partitions=1', 'target_partitions=4'), 1)
        >>> any(row["a"] is None for row in c.rows)  # a repartition only with 4 partitions
        True
    """
    from plansight.profiling.profile import profile_query

    runs, labels = [], []
    for options in (a, b):
        saved = {name: session.get_option(name) for name in options}
        try:
            for name, value in options.items():
                session.set_option(name, value)
            query = session.sql(sql)  # the query keeps a copy of the options
        finally:
            for name, value in saved.items():
                session.set_option(name, value)
        label = ", ".join(f"{name}={value}" for name, value in options.items())
        labels.append(label)
        runs.append(profile_query(query, label=label) if profile else query.execute())
    return compare(runs[0], runs[1], labels=(labels[0], labels[1]))


def _row(a: dict | None, b: dict | None) -> dict[str, Any]:
    side = a if a is not None else b
    return {"operator": f"{side['operator']} #{side['operator_id']}", "a": a, "b": b}


