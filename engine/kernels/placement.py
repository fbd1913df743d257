"""Sorting rows by two small integer keys when no two rows share them: place, don't sort.

Rows keyed by (partition code, rank of the ORDER BY value) in a small key space -- a
per-partition sequence number, a timestamp unique within its partition -- each own one slot
``major * cardinality + minor`` of a table barely larger than the row count. Writing every
row number into its slot and reading the occupied slots back in order *is* the stable sort::

    rows (major, minor)   r0 (1,0)  r1 (0,2)  r2 (1,1)  r3 (0,0)      cardinality 3
    slots                 [r3  .  r1 | r0  r2  . ]
    permutation           r3 r1 r0 r2

One pass over the rows and one over the slots, no temporary key arrays (numpy needed the
combined key, its mask and a gather: three arrays of n). The first row that finds its slot
taken stops the placement: the keys tie, and the caller sorts instead.
"""

from __future__ import annotations

import numpy as np

from plansight.engine.kernels.jit import kernel


@kernel
def place_distinct(major, minor, cardinality, slots):
    """(permutation, True) sorting rows by ``major * cardinality + minor`` (``cardinality``
    0: by ``major`` alone), all keys in ``0..len(slots) - 1``; (empty, False) as soon as two
    rows share a key. ``slots`` arrives filled with -1 (int32 when the row count allows:
    half the memory the scattered writes land in)."""
    n = len(major)
    for i in range(n):
        key = major[i] * cardinality + minor[i] if cardinality else major[i]
        if slots[key] >= 0:
            return np.empty(0, np.int64), False
        slots[key] = i
    out = np.empty(n, np.int64)
    at = 0
    for key in range(len(slots)):
        row = slots[key]
        if row >= 0:
            out[at] = row
            at += 1
    return out, True
