"""Per-operator, per-partition metrics, shared names across all operators.

Operators only ever add to counters of their own ``PartitionMetrics``; readers (EXPLAIN
ANALYZE, widgets) aggregate across partitions.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from plansight.engine.exec.compute_clock import open_pulls

SHARED_METRICS = ("output_rows", "output_batches", "elapsed_compute", "mem_reserved", "peak_mem",
                  "spill_count", "spilled_bytes", "spilled_rows")

#: How a metric combines across partitions: counters and times add up, a "max" (a peak) is
#: the largest partition's. A metric not named here is a counter.
METRIC_KINDS = {"peak_mem": "max", "elapsed_compute": "time"}


def format_bytes(n: int | float) -> str:
    """Human-readable bytes in binary units, the one unit system of every plansight figure
    (EXPLAIN ANALYZE, the monitor, errors), e.g. ``format_bytes(1536) == '1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def format_metric(name: str, value: float) -> str:
    """``name=value`` as EXPLAIN ANALYZE and the monitor print it: byte counts (names ending
    in ``_mem`` or ``_bytes``) in binary units, times in ms, anything else an integer.

    Example:
        >>> format_metric("peak_mem", 3 << 20), format_metric("rows_read", 12.0)
        ('peak_mem=3.0 MiB', 'rows_read=12')
    """
    if name.endswith(("_mem", "_bytes")):
        return f"{name}={format_bytes(value)}"
    if METRIC_KINDS.get(name) == "time":
        return f"{name}={value * 1000:.3f}ms"
    return f"{name}={int(value)}"


def combine(name: str, values) -> float:
    """The operator's total of metric ``name`` over its partitions' ``values``."""
    if METRIC_KINDS.get(name) == "max":
        return max(values, default=0)
    return sum(values)


@dataclass
class PartitionMetrics:
    operator_id: int
    operator: str
    partition: int
    values: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    start: float | None = None
    end: float | None = None

    def add(self, name: str, amount: float = 1) -> None:
        self.values[name] += amount

    def set_max(self, name: str, value: float) -> None:
        if value > self.values[name]:
            self.values[name] = value

    def __getitem__(self, name: str) -> float:
        return self.values.get(name, 0)


class MetricsRegistry:
    """All metrics of one query run, keyed by (operator id, partition)."""

    def __init__(self):
        self._metrics: dict[tuple[int, int], PartitionMetrics] = {}
        self._lock = threading.Lock()

    def for_partition(self, operator_id: int, operator: str, partition: int) -> PartitionMetrics:
        key = (operator_id, partition)
        with self._lock:
            metrics = self._metrics.get(key)
            if metrics is None:
                metrics = self._metrics[key] = PartitionMetrics(operator_id, operator, partition)
            return metrics

    def partitions(self, operator_id: int) -> list[PartitionMetrics]:
        with self._lock:
            found = [m for (op, _), m in self._metrics.items() if op == operator_id]
        return sorted(found, key=lambda m: m.partition)

    def total(self, operator_id: int, name: str) -> float:
        return combine(name, [m[name] for m in self.partitions(operator_id)])

    def snapshot(self, live: bool = False) -> dict[int, dict[str, float]]:
        """Operator id -> metric totals (a consistent copy for observers). ``live`` adds the
        own time of pulls still in progress (a sort consuming its input), which their
        operators are charged only when the pull ends."""
        with self._lock:
            items = list(self._metrics.values())
        values: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for m in items:
            for name, value in list(m.values.items()):
                values[m.operator_id][name].append(value)
        if live:
            mine = {id(m) for m in items}
            for m, own in open_pulls(time.perf_counter()):
                if id(m) in mine:
                    values[m.operator_id]["elapsed_compute"].append(own)
        return {op: {name: combine(name, vs) for name, vs in metrics.items()}
                for op, metrics in values.items()}

    def partition_metrics(self) -> list[PartitionMetrics]:
        """Every (operator, partition)'s metrics, as a task sends them back to its client."""
        with self._lock:
            return list(self._metrics.values())

    def merge(self, received: list[PartitionMetrics]) -> None:
        """Add metrics a task measured elsewhere (a worker) into this registry."""
        for m in received:
            mine = self.for_partition(m.operator_id, m.operator, m.partition)
            for name, value in m.values.items():
                if METRIC_KINDS.get(name) == "max":
                    mine.set_max(name, value)
                else:
                    mine.add(name, value)
            mine.start = m.start if mine.start is None else min(mine.start, m.start or 0)
            mine.end = m.end if mine.end is None else max(mine.end, m.end or 0)
