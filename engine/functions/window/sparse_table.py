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
        levels = min(block_bits, _floor_log2(max_length))
        self.short_max = 1 << (levels + 1)  # queries shorter than this use the short table
        self.short = _sparse_levels(values, op, self.identity, levels)
        self.use_blocks = max_length >= self.short_max
        if self.use_blocks:
            size = 1 << block_bits
            num_blocks = -(-n // size)
            padded = np.full(num_blocks * size, self.identity, dtype=values.dtype)
            padded[:n] = values
            grid = padded.reshape(num_blocks, size)
            self.prefix = op.accumulate(grid, axis=1).ravel()
            self.suffix = op.accumulate(grid[:, ::-1], axis=1)[:, ::-1].ravel()
            block_values = op.reduce(grid, axis=1)
            longest_blocks = max(1, max_length // size)
            self.blocks = _sparse_levels(block_values, op, self.identity,
                                         _floor_log2(longest_blocks))

    def query(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``op`` over ``values[lo[i]:hi[i]]`` for every i; ``identity`` where lo >= hi."""
        length = hi - lo
        result = np.full(len(lo), self.identity, dtype=self.short.dtype)
        short = (length > 0) & (length < self.short_max)
        if short.any():
            result[short] = _query_levels(self.short, self.op, lo[short], hi[short])
        if self.use_blocks:
            long = length >= self.short_max
            if long.any():
                result[long] = self._query_blocks(lo[long], hi[long])
        return result

    def _query_blocks(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        last = hi - 1
        result = self.op(self.suffix[lo], self.prefix[last])
        first_block = (lo >> self.block_bits) + 1
        end_block = last >> self.block_bits
        between = end_block > first_block
        if between.any():
            inner = _query_levels(self.blocks, self.op, first_block[between], end_block[between])
            result[between] = self.op(result[between], inner)
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


def _query_levels(table: np.ndarray, op: np.ufunc, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Two overlapping power-of-two windows per query; requires hi > lo."""
    level = np.frexp((hi - lo).astype(np.float64))[1].astype(np.int64) - 1
    return op(table[level, lo], table[level, hi - (np.int64(1) << level)])
