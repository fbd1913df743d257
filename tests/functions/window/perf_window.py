"""Perf sanity check for the window kernels (a script, not a test; timings are not asserted).

    /work/venv/bin/python tests/functions/window/perf_window.py

1M rows in 6,666 partitions: MIN over ROWS 100 PRECEDING must run well under a second and
ROWS 10000 PRECEDING must cost the same (no per-row or per-partition loop, no frame-size
factor). A few other shapes are timed for context, and one huge partition at the end.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pyarrow as pa

from plansight.engine.functions.window import FrameBound, FrameSpec, evaluate_window

N, PARTITIONS = 1_000_000, 6_666


def _timed(label: str, func: str, args: list, starts: np.ndarray, keys: list,
           frame: FrameSpec | None, repeat: int = 3, **kwargs) -> float:
    best = best_cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        evaluate_window(func, args, partition_starts=starts, order_keys=keys,
                        descending=[False] * len(keys), nulls_first=[False] * len(keys),
                        frame=frame, **kwargs)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    # CPU time is the steadier number on a busy machine
    print(f"  {label:<52} {best * 1000:8.1f} ms wall {best_cpu * 1000:8.1f} ms cpu")
    return best_cpu


def main() -> None:
    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(np.arange(1, N), PARTITIONS - 1, replace=False))
    starts = np.concatenate(([0], cuts, [N])).astype(np.int64)
    values = pa.array(rng.normal(0, 1, N))
    ints = pa.array(rng.integers(0, 1000, N))
    key = pa.array(np.concatenate([np.sort(rng.integers(0, 10**6, e - s))
                                   for s, e in itertools.pairwise(starts)]))
    keys = [key]
    rows = lambda k: FrameSpec("rows", FrameBound("preceding", k),
                               FrameBound("current_row"))
    print(f"{N:,} rows, {PARTITIONS:,} partitions (avg {N // PARTITIONS} rows)")
    small = _timed("min(x) ROWS 100 PRECEDING", "min", [values], starts, keys, rows(100))
    large = _timed("min(x) ROWS 10000 PRECEDING", "min", [values], starts, keys, rows(10_000))
    print(f"  -> frame 10001 / frame 101 time ratio: {large / small:.2f}")
    _timed("max(int) ROWS 100 PRECEDING", "max", [ints], starts, keys, rows(100))
    _timed("sum(x) ROWS 100 PRECEDING (compensated)", "sum", [values], starts, keys, rows(100))
    _timed("stddev_samp(x) ROWS 100 PRECEDING", "stddev_samp", [values], starts, keys,
           rows(100))
    _timed("avg(x) RANGE 5000 PRECEDING..5000 FOLLOWING", "avg", [values], starts, keys,
           FrameSpec("range", FrameBound("preceding", 5000), FrameBound("following", 5000)))
    _timed("min(x) GROUPS 3 PRECEDING EXCLUDE TIES", "min", [values], starts, keys,
           FrameSpec("groups", FrameBound("preceding", 3), FrameBound("current_row"), "ties"))
    _timed("min(x) whole partition", "min", [values], starts, keys,
           FrameSpec("rows", FrameBound("unbounded_preceding"),
                     FrameBound("unbounded_following")))
    _timed("count(DISTINCT int) default frame", "count", [ints], starts, keys, None,
           distinct=True)
    _timed("count(DISTINCT int) ROWS 100 PRECEDING", "count", [ints], starts, keys, rows(100),
           distinct=True)
    _timed("rank()", "rank", [], starts, keys, None)
    _timed("lag(x, 3 IGNORE NULLS)", "lag", [values, pa.array(np.full(N, 3))], starts, keys,
           None, ignore_nulls=True)
    _timed("nth_value(x, 5) ROWS 100 PRECEDING", "nth_value",
           [values, pa.array(np.full(N, 5))], starts, keys, rows(100))

    print("one partition of 1M rows")
    one = np.array([0, N])
    _timed("min(x) ROWS 100 PRECEDING", "min", [values], one, keys, rows(100))
    _timed("min(x) ROWS 100000 PRECEDING", "min", [values], one, keys, rows(100_000))
    _timed("min(x) default frame (growing)", "min", [values], one, keys, None)
    print("100,000 partitions of 10 rows")
    tiny = np.arange(0, N + 1, 10, dtype=np.int64)
    _timed("sum(x) ROWS 2 PRECEDING", "sum", [values], tiny, keys, rows(2))
    _timed("row_number()", "row_number", [], tiny, keys, None)


if __name__ == "__main__":
    main()
