"""Range MIN/MAX over arbitrary ``[lo, hi)`` row intervals in O(1) per query, O(n) memory.

A plain sparse table answers a range-minimum with two overlapping power-of-two windows but
needs n * log2(n) memory. This blocked variant keeps it linear::

    short table   levels 0..K (K <= block_bits): level k holds op over rows [i, i + 2**k)
                  -> any query shorter than 2 * 2**K, two lookups
    blocks        rows cut into blocks of B = 2**block_bits rows; per block the running
                  op from the left (prefix) and from the right (suffix); a sparse table over
                  the per-block results (n / B * log2(n / B) entries)
                  -> a longer query = suffix[lo] op prefix[hi - 1] op blocks strictly between

          lo                                            hi-1
    |....[=====|===========|===========|===========|====]......|
         suffix      whole blocks (block sparse table)   prefix

Only the levels the longest queried frame needs are built, so ROWS 100 PRECEDING costs the
same as ROWS 10000 PRECEDING up to one block-table level per doubling. Works for any
associative, idempotent ufunc (np.minimum, np.maximum, np.fmin, np.fmax).
"""

from __future__ import annotations

import numpy as np


class RangeExtremum:
    """Answers ``op`` over ``values[lo:hi]`` for many ``(lo, hi)`` pairs at once.

    Example:
        >>> table = RangeExtremum(np.array([5, 3, 8, 1, 9, 2]), np.minimum, 99, max_length=6,
        ...                       block_bits=1)
        >>> table.query(np.array([0, 2, 4, 3]), np.array([3, 6, 5, 3])).tolist()
        [3, 1, 9, 99]
    """

    def __init__(self, values: np.ndarray, op: np.ufunc, identity: object, max_length: int,
                 block_bits: int = 5):
        self.op = op
        self.identity = values.dtype.type(identity)
        self.block_bits = block_bits
        n = len(values)
        self.num_rows = n
        max_length = max(1, min(int(max_length), n))
        # floor(log2(length)) for every possible query length, looked up instead of computed
        self.log2 = (np.frexp(np.arange(max_length + 1, dtype=np.float64))[1] - 1).astype(
            np.intp)
        levels = min(block_bits, _floor_log2(max_length))
        self.short_max = 1 << (levels + 1)  # queries shorter than this use the short table
        self.short = _sparse_levels(values, op, self.identity, levels)
        self.use_blocks = max_length >= self.short_max
        if self.use_blocks:
            size = 1 << block_bits
            num_blocks = -(-n // size)
            padded = np.full(num_blocks * size, self.identity, dtype=values.dtype)
            padded[:n] = values
            # (size, num_blocks): running op down axis 0 is a few long vector operations
            columns = np.ascontiguousarray(padded.reshape(num_blocks, size).T)
            self.prefix = op.accumulate(columns, axis=0).T.ravel()
            self.suffix = op.accumulate(columns[::-1], axis=0)[::-1].T.ravel()
            block_values = op.reduce(columns, axis=0)
            longest_blocks = max(1, max_length // size)
            self.blocks = _sparse_levels(block_values, op, self.identity,
                                         _floor_log2(longest_blocks))

    def query(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``op`` over ``values[lo[i]:hi[i]]`` for every i; ``identity`` where lo >= hi."""
        length = hi - lo
        if not self.use_blocks:
            empty = length <= 0  # answered by a dummy [0, 1) query, then masked
            result = _query_levels(self.short, self.num_rows, self.log2, self.op,
                                   np.where(empty, 0, lo), np.where(empty, 1, hi))
            return np.where(empty, self.identity, result)
        short = (length > 0) & (length < self.short_max)
        long = length >= self.short_max
        if long.all():
            return self._query_blocks(lo, hi)
        result = np.full(len(lo), self.identity, dtype=self.short.dtype)
        if short.any():
            result[short] = _query_levels(self.short, self.num_rows, self.log2, self.op,
                                          lo[short], hi[short])
        if long.any():
            result[long] = self._query_blocks(lo[long], hi[long])
        return result

    def _query_blocks(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        last = hi - 1
        result = self.op(np.take(self.suffix, lo), np.take(self.prefix, last))
        first_block = (lo >> self.block_bits) + 1
        end_block = last >> self.block_bits
        between = end_block > first_block
        if between.any():
            num_blocks = self.blocks.shape[1]
            # rows without whole blocks in between query a dummy block and are masked out
            safe_first = np.minimum(first_block, num_blocks - 1)
            safe_end = np.maximum(end_block, safe_first + 1)
            inner = _query_levels(self.blocks, num_blocks, self.log2, self.op, safe_first,
                                  safe_end)
            result = np.where(between, self.op(result, inner), result)
        return result


def _floor_log2(value: int) -> int:
    return max(0, int(value).bit_length() - 1)


def _sparse_levels(values: np.ndarray, op: np.ufunc, identity: np.generic,
                   levels: int) -> np.ndarray:
    """(levels + 1, n) table: row k holds op over [i, i + 2**k) (identity past the end)."""
    n = len(values)
    table = np.full((levels + 1, n), identity, dtype=values.dtype)
    table[0] = values
    for k in range(1, levels + 1):
        half = 1 << (k - 1)
        width = n - (1 << k) + 1
        if width <= 0:
            break
        op(table[k - 1, :width], table[k - 1, half:half + width], out=table[k, :width])
    return table


def _query_levels(table: np.ndarray, width: int, log2: np.ndarray, op: np.ufunc,
                  lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Two overlapping power-of-two windows per query; requires hi > lo."""
    level = np.take(log2, hi - lo)
    flat = table.ravel()
    base = level * width
    return op(np.take(flat, base + lo), np.take(flat, base + hi - (np.intp(1) << level)))
