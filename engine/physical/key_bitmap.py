"""A membership bitmap over an integer key range: exact ``IN`` for many join keys, in numpy.

A hash join's build side with thousands to millions of distinct integer keys (the 70K orders
left after Q21's filtered supplier join, Q8's 1,451 parts) is too big for ``pc.is_in`` (which
hashes its value set again on every call) and its min/max says almost nothing (the keys
spread over the whole range). One bit per value of [low, high] says exactly which keys are
there:

    keys {3, 5, 12}, low 3        bit i <-> value low + i
    bits  1 0 1 0 0 0 0 0 | 0 1 0 0 0 0 0 0      (np.packbits order: first bit is the high one)

and a probe column is tested in one compiled pass (kernels/membership.py: range check, shift,
bit test) -- no hashing, no false positives. The span is capped by the caller
(``dynamic_filter_max_bitmap_bits``): past it only the range applies.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.kernels.membership import bitmap_contains

_BOOL_SPAN = 1 << 26  # spans up to this build through a temporary byte per value
_BIT = np.array([0x80 >> i for i in range(8)], dtype=np.uint8)  # offset % 8 -> its bit
_NO_NULLS = np.zeros(0, dtype=np.uint8)  # the validity bitmap of a column without NULLs


class KeyBitmap:
    """Which integers of [low, high] are keys.

    Example:
        >>> bitmap = KeyBitmap(np.array([3, 5, 12]))
        >>> bitmap.contains(pa.array([3, 4, 5, None, 12, 13])).to_pylist()
        [True, False, True, False, True, False]
        >>> bitmap.any_between(6, 11), bitmap.any_between(6, 12)
        (False, True)
    """

    def __init__(self, keys: np.ndarray):
        """``keys``: the distinct (or not: duplicates are harmless) non-NULL integer keys."""
        keys = np.asarray(keys, dtype=np.int64)
        if len(keys) == 0:
            raise ValueError("a key bitmap needs at least one key")
        self.low, self.high = int(keys.min()), int(keys.max())
        span = self.high - self.low + 1
        offsets = keys - self.low
        if span <= _BOOL_SPAN:
            # a byte per value, then packed: one scatter pass, no read-modify-write per key
            present = np.zeros(span, dtype=bool)
            present[offsets] = True
            bits = np.packbits(present)
        else:
            bits = np.zeros((span + 7) // 8, dtype=np.uint8)
            np.bitwise_or.at(bits, offsets >> 3, np.take(_BIT, offsets & 7))
        self.bits = bits

    def contains(self, column: pa.Array) -> pa.Array:
        """A boolean array: the value is a key (NULLs: False)."""
        keep, _ = self.contains_counted(column)
        return keep

    def contains_counted(self, column: pa.Array) -> tuple[pa.Array, int]:
        """(``contains(column)``, how many values are keys): one compiled pass
        (kernels/membership.py) over an integer column of at most 64 bits."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if len(column) == 0:
            return pa.array([], pa.bool_()), 0
        t = column.type
        values = np.frombuffer(column.buffers()[1], dtype=t.to_pandas_dtype())[
            column.offset:column.offset + len(column)]
        validity = column.buffers()[0] if column.null_count else None
        validity = np.frombuffer(validity, dtype=np.uint8) if validity is not None else \
            _NO_NULLS
        keep, kept = bitmap_contains(values, validity, column.offset, self.low, self.high,
                                     self.bits)
        return pa.Array.from_buffers(pa.bool_(), len(column), [None, pa.py_buffer(keep)]), \
            int(kept)

    def any_between(self, low: int, high: int) -> bool:
        """Whether some key lies in [low, high]. One pass over the bytes between: called
        once per row group, not per row."""
        low, high = max(low, self.low), min(high, self.high)
        if high < low:
            return False
        a, b = low - self.low, high - self.low
        first, last = a >> 3, b >> 3
        head = 0xFF >> (a & 7)  # bits at and after a in its byte
        tail = (0xFF << (7 - (b & 7))) & 0xFF  # bits up to and with b in its byte
        if first == last:
            return bool(int(self.bits[first]) & head & tail)
        return bool(int(self.bits[first]) & head or int(self.bits[last]) & tail or
                    self.bits[first + 1:last].any())
