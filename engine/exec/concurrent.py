"""Split one operator's work over threads: for the pieces of a single partition's work.

Partitions already run on their own threads (scheduler). Some operators hold their whole
input in one partition by design — HashWindowAggExec computes every window over integer
permutations of all rows — and would leave the other cores idle. Their work splits into
independent pieces (row ranges to encode, groups of window partitions to evaluate), each a
few calls of Arrow, numpy or numba kernels that release the GIL, so threads give real
parallelism without moving rows between partitions.

This module imports nothing of the engine: kernels at any layer may use it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")

#: below this many rows per piece, a thread costs more than it saves
MIN_ROWS_PER_PIECE = 1 << 16


def pieces_for(rows: int, workers: int) -> int:
    """How many pieces ``rows`` rows are worth splitting into with ``workers`` threads."""
    return max(1, min(workers, rows // MIN_ROWS_PER_PIECE))


def run_concurrently(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The results of ``calls``, in order, each run on its own thread (the first on the
    caller's). Every call finishes before the first exception (in call order) is raised,
    so no thread outlives the operator that started it.

    Example:
        >>> run_concurrently([lambda: 1, lambda: 2])
        [1, 2]
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    results: list = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as error:  # noqa: BLE001 (re-raised below, in call order)
            errors[index] = error

    threads = [threading.Thread(target=run, args=(i,), daemon=True,
                                name=f"plansight-piece-{i}") for i in range(1, len(calls))]
    for thread in threads:
        thread.start()
    run(0)
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results


def split_runs(starts: np.ndarray, pieces: int) -> list[tuple[int, int]]:
    """Split runs (``starts``: start row of every run plus the row count as last element)
    into at most ``pieces`` consecutive groups of whole runs with about equal rows; each
    group as a (first run, end run) index pair.

    Example:
        >>> split_runs(np.array([0, 3, 4, 9, 10]), 2)
        [(0, 2), (2, 4)]
    """
    runs = len(starts) - 1
    if pieces <= 1 or runs <= 1:
        return [(0, runs)]
    rows = int(starts[-1])
    targets = [rows * i // pieces for i in range(1, pieces)]
    after = np.searchsorted(starts, targets, side="left")  # the first run starting at/after
    before = np.maximum(after - 1, 0)
    closer = np.asarray(targets) - starts[before] < starts[np.minimum(after, runs)] - targets
    cuts = np.where(closer, before, after)
    bounds = sorted({0, runs, *(int(c) for c in cuts if 0 < c < runs)})
    return list(zip(bounds[:-1], bounds[1:]))
