"""lag/lead by a constant offset: every row's source row in one pass over the partitions.

``lag(x, k)`` reads row ``i - k`` when it lies in row i's partition. With numpy that took
the row numbers, every row's partition start and end (a partition index and two gathers),
the offsets, the sources and a masked copy of them: eight arrays of n int64 before the
values were touched, 64 bytes a row on top of the result -- the peak memory of a
``RANK() ..., LAG(v) ...`` query over 1M rows. Here the partition bounds come from the
partition starts as the loop walks them, and only the sources and their flags are written::

    partition   [ a  b  c  d ][ e  f ]        lag by 1
    source        -  a  b  c    -  e          (- : not found, source 0)
"""

from __future__ import annotations

import numpy as np

from plansight.engine.kernels.jit import kernel


@kernel
def shifted_sources(partition_starts, back):
    """(source, found) of every row for a constant ``back`` (positive: earlier rows, as
    lag; negative: later rows, as lead; ``|back|`` below the row count, so ``i - back``
    cannot overflow): ``source[i] = i - back`` where that row is in row i's partition (rows
    sorted by partition; ``partition_starts`` every partition's first row, then the row
    count), else ``source[i] = 0`` and ``found[i] = False``."""
    n = partition_starts[-1]
    source = np.zeros(n, np.int64)
    found = np.zeros(n, np.bool_)
    for p in range(len(partition_starts) - 1):
        start = partition_starts[p]
        end = partition_starts[p + 1]
        # rows of the partition whose source stays inside it: [start + back, end + back)
        low = max(start, start + back)
        high = min(end, end + back)
        for i in range(low, high):
            source[i] = i - back
            found[i] = True
    return source, found
