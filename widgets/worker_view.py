"""The monitor's per-worker view of a query run on a cluster: how its tasks spread over the
workers, and whether one worker carries the query.

Each ``TaskFinished`` a worker forwards adds one task to its row: the rows the task produced,
the seconds it ran and its memory peak. A worker whose tasks ran ``SKEW_FACTOR`` times the
median worker's time is flagged (as a skewed partition is): the cluster waits on it. Spark's
executors page is the model; this one fills in while the query runs.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from plansight.engine.exec.events import TaskFinished
from plansight.engine.exec.memory_pool import format_bytes

SKEW_FACTOR = 4  # the same threshold as the per-partition skew
_CELL = "padding:1px 8px;line-height:1.35"
_NUMBER = f"style='text-align:right;{_CELL}'"


@dataclass
class WorkerState:
    """What one worker did for the query so far."""

    tasks: int = 0
    rows: int = 0
    busy: float = 0.0  # seconds its tasks ran, summed
    peak_memory: int = 0  # the largest peak of one of its tasks

    def add(self, event: TaskFinished) -> None:
        self.tasks += 1
        self.rows += event.rows
        self.busy += event.elapsed
        self.peak_memory = max(self.peak_memory, event.peak_memory)

    def copy(self) -> WorkerState:
        return WorkerState(self.tasks, self.rows, self.busy, self.peak_memory)


def busiest(workers: dict[str, WorkerState]) -> tuple[str | None, bool]:
    """The worker whose tasks ran longest, and whether it ran ``SKEW_FACTOR`` times the
    median worker's time (never with one worker).

    Example:
        >>> busiest({"a": WorkerState(1, 10, 1.0), "b": WorkerState(1, 10, 1.2),
        ...          "c": WorkerState(3, 90, 9.0)})
        ('c', True)
    """
    if not workers:
        return None, False
    times = sorted(w.busy for w in workers.values())
    middle = len(times) // 2
    median = times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2
    top = max(workers, key=lambda name: workers[name].busy)
    return top, len(workers) > 1 and workers[top].busy > 0 and \
        workers[top].busy >= SKEW_FACTOR * median


def worker_table_html(workers: dict[str, WorkerState]) -> str:
    """One row per worker: tasks, rows, time as a bar against the busiest, memory peak."""
    top, skewed = busiest(workers)
    longest = workers[top].busy or 1.0
    rows = []
    for name in sorted(workers):
        state = workers[name]
        flagged = skewed and name == top
        colour = "#d62728" if flagged else "#1f77b4"
        bar = (f"<span style='display:inline-block;width:{max(1, round(80 * state.busy / longest))}"
               f"px;height:8px;background:{colour};margin-right:4px'></span>")
        rows.append(f"<tr class='plansight-worker'><td style='{_CELL}'><code>{html.escape(name)}"
                    f"</code></td><td {_NUMBER}>{state.tasks:,}</td>"
                    f"<td {_NUMBER}>{state.rows:,}</td>"
                    f"<td style='{_CELL};white-space:nowrap'>{bar}{state.busy * 1000:,.1f} ms</td>"
                    f"<td {_NUMBER}>{format_bytes(state.peak_memory)}</td></tr>")
    head = "".join(f"<th style='text-align:{align};{_CELL}'>{title}</th>" for title, align in (
        ("worker", "left"), ("tasks", "right"), ("rows out", "right"),
        ("task time", "left"), ("task memory peak", "right")))
    flag = ""
    if skewed:
        flag = (f" <span class='plansight-worker-skewed' style='color:#d62728;font-weight:bold'>"
                f"{html.escape(top)} ran ≥ {SKEW_FACTOR}× the median worker's task time</span>")
    return (f"<div class='plansight-workers' style='margin-top:4px'>tasks per worker{flag}"
            f"<table style='border-collapse:collapse'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def worker_lines(workers: dict[str, WorkerState]) -> list[str]:
    """The same per worker, as text lines."""
    top, skewed = busiest(workers)
    lines = [f"worker {name}: tasks={state.tasks} rows={state.rows:,} "
             f"time={state.busy * 1000:.1f}ms peak={format_bytes(state.peak_memory)}"
             for name, state in sorted(workers.items())]
    if skewed:
        lines.append(f"  -- skewed: {top} ran >= {SKEW_FACTOR}x the median worker's task time")
    return lines
