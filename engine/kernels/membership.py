"""Bitmap membership in one pass: which values of a column are keys of a ``KeyBitmap``.

    values[i] ──valid, in [low, high]?──▶ offset = values[i] - low
              ──bit (offset & 7) of bits[offset >> 3] set?──▶ bit i of keep; kept += 1

The numpy version of this test took eight passes over the batch (copy, subtract, compare,
clear, two gathers, and, and) and a ninth to pack the booleans into Arrow's bitmap; here
each value is read once, its NULL bit read from Arrow's validity bitmap where it lies, the
result written as an Arrow bitmap (least significant bit first), and the kept rows counted on
the way, so a filter that keeps every row is known without another pass. The kernel
releases the GIL (jit.py): two scan partitions test their batches at the same time.
"""

from __future__ import annotations

import numpy as np

from plansight.engine.kernels.jit import kernel


@kernel
def bitmap_contains(values, validity, validity_offset, low, high, bits):
    """(keep, kept): ``keep`` an Arrow boolean bitmap, bit i set when values[i] is valid
    (bit ``validity_offset + i`` of ``validity``; an empty ``validity``: all are), lies in
    [low, high], and bit ``values[i] - low`` of ``bits`` (np.packbits order: most
    significant first) is set. The bounds are compared before subtracting: no offset wraps."""
    n = len(values)
    keep = np.zeros((n + 7) >> 3, np.uint8)
    has_nulls = len(validity) > 0
    kept = 0
    for i in range(n):
        value = np.int64(values[i])
        if value < low or value > high:
            continue
        if has_nulls:
            at = validity_offset + i
            if (validity[at >> 3] >> (at & 7)) & 1 == 0:
                continue
        offset = value - low
        if bits[offset >> 3] & (0x80 >> (offset & 7)):
            keep[i >> 3] |= np.uint8(1 << (i & 7))
            kept += 1
    return keep, kept


@kernel
def distinct_in_range(values, low, span):
    """The distinct ``values`` (each in [low, low + span)) in order of first appearance,
    marked in a bitmap of ``span`` bits (an eighth of a byte a value: at most what the
    caller's range bound lets the keys themselves take): one pass, where a hash table
    (Arrow's unique, ~40 ns a key) misses the cache on every new key."""
    seen = np.zeros((span + 7) >> 3, np.uint8)
    out = np.empty(len(values), np.int64)
    count = 0
    for i in range(len(values)):
        offset = values[i] - low
        bit = np.uint8(1 << (offset & 7))
        byte = offset >> 3
        if not seen[byte] & bit:
            seen[byte] |= bit
            out[count] = values[i]
            count += 1
    return out[:count].copy()
