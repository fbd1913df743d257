"""MIN/MAX/SUM over fixed-width ROWS frames in O(n), whatever the width (van Herk / Gil-Werman).

``ROWS BETWEEN a PRECEDING AND b FOLLOWING`` covers rows ``[i - a, i + b]``: every frame has
the same width ``w = a + b + 1`` except where the partition clips it. Padding every partition
with ``a`` identity values in front and ``b`` behind makes every frame exactly ``w`` wide
without changing its result. Cut the padded array into blocks of ``w``; a window of width
``w`` starting at ``j`` spans at most two blocks, so

    op(frame) = op(suffix[j], before[j + w])

with ``suffix[k]`` the op from ``k`` to the end of its block and ``before[k]`` the op over
the elements of k's block that come before ``k`` (the identity at a block start, so a frame
that is exactly one block takes nothing from the next)::

    padded   . . | x x x x | . . | x x x | . .        (. = identity)
    blocks   [ w ][ w ][ w ][ w ] ...
    frame j       [---------)   = suffix in one block + "before" in the next

Three vector passes (two running ops, one gather pair), independent of ``w``: a 10,001-row
frame costs what a 101-row frame does. The two parts are disjoint, so the same works for
SUM: each part adds at most ``w`` values in order, so a float sum carries the rounding of a
``w``-row running sum (like a segment tree), never the cancellation of a prefix-sum
difference deep into a long partition, and needs no compensation. The padding grows the
array by (a + b) per partition, so many small partitions with a wide frame use the sparse
table (MIN/MAX) or prefix sums (SUM) instead.
"""

from __future__ import annotations

import numpy as np

from plansight.engine.kernels.sliding import ADD, OPS, sliding_frames

MAX_GROWTH = 2.0  # padded length at most this many times the row count


def sliding_applies(num_rows: int, num_partitions: int, before: int, after: int) -> bool:
    """Whether padding ``before``/``after`` identity values per partition stays small."""
    return before >= 0 and after >= 0 and \
        num_partitions * (before + after) <= MAX_GROWTH * max(num_rows, 1)


def sliding_reduce(values: np.ndarray, op: np.ufunc, identity: object,
                   partition_starts: np.ndarray, before: int, after: int) -> np.ndarray:
    """``op`` (an associative ufunc: minimum, fmin, maximum, add) over rows
    ``[i - before, i + after]`` of every row's partition.

    ``values`` holds the identity where a row does not contribute; rows are sorted by
    partition: ``partition_starts`` (int64) is every partition's first row, then the row
    count (empty partitions allowed; each still counts in the blocks' alignment).

    Example:
        >>> v = np.array([5, 3, 8, 1, 9, 2])
        >>> part = np.array([0, 4, 6])
        >>> sliding_reduce(v, np.minimum, 99, part, 1, 0).tolist()
        [5, 3, 3, 1, 9, 2]
        >>> sliding_reduce(v, np.add, 0, part, 1, 1).tolist()
        [8, 16, 12, 9, 11, 11]
    """
    code = OPS.get(op)
    if code is not None and values.dtype.kind in "iuf":
        if code == ADD and values.dtype.kind in "iu" and values.dtype.itemsize < 8:
            # numpy's add.accumulate widens small integers to 64 bits: so do we
            values = values.astype(np.int64 if values.dtype.kind == "i" else np.uint64)
        # the same blocks in one compiled pass per partition (kernels/sliding.py)
        return sliding_frames(np.ascontiguousarray(values),
                              np.asarray(partition_starts, dtype=np.int64), before, after,
                              code, values.dtype.type(identity))
    return padded_reduce(values, op, identity, partition_starts, before, after)


def padded_reduce(values: np.ndarray, op: np.ufunc, identity: object,
                  partition_starts: np.ndarray, before: int, after: int) -> np.ndarray:
    """``sliding_reduce`` in numpy (any ufunc, any dtype): the padded array in blocks."""
    n = len(values)
    if n == 0:
        return values.copy()
    sizes = np.diff(partition_starts)
    partition_index = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    width = before + after + 1
    partitions = int(partition_index[-1]) + 1
    # one spare block: a window ending in the last block still has a block after it
    blocks = -(-(n + partitions * (before + after)) // width) + 1
    padded = np.full(blocks * width, identity, dtype=values.dtype)
    # row i sits after its own partition's front padding and every earlier partition's padding
    position = np.arange(n, dtype=np.int64) + before * (partition_index + 1) + \
        after * partition_index
    padded[position] = values
    # (width, blocks): running op down axis 0 is `width` long vector operations
    columns = np.ascontiguousarray(padded.reshape(blocks, width).T)
    suffix = op.accumulate(columns[::-1], axis=0)[::-1].T.ravel()
    # exclusive prefix: op over the block's elements *before* k (identity at a block start),
    # so a window starting on a block boundary adds nothing from the next block
    before_k = np.empty_like(columns)
    before_k[0] = identity
    op.accumulate(columns[:-1], axis=0, out=before_k[1:])
    first = position - before
    return op(suffix[first], before_k.T.ravel()[first + width])
