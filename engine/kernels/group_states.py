"""Aggregate states updated by group id: one pass over the rows, no loop over groups.

    rows ──group ids (kernels/keys.py)──▶ ids[i] in 0..groups-1
    values[i], valid[i] ──scatter into states[ids[i]]──▶ sum / count / min / max per group

Each kernel takes a batch's group ids and values and updates one state per group in place,
with how many valid values the group saw (the caller makes a group without any NULL, as
SQL's SUM/MIN/MAX of no values is NULL), so a column is read chunk by chunk, never copied.
Integer sums report overflow instead of wrapping: the caller then takes Arrow's path, which
raises the SQL error or sums on wider words. Every kernel releases the GIL (jit.py).
"""

from __future__ import annotations

import numpy as np

from plansight.engine.kernels.jit import kernel


@kernel
def first_rows(ids, groups):
    """The first row of each group (ids are dense, numbered in order of first appearance
    or not)."""
    first = np.full(groups, -1, np.int64)
    for i in range(len(ids)):
        g = ids[i]
        if first[g] == -1:
            first[g] = i
    return first


@kernel
def count_rows(ids, counts):
    for i in range(len(ids)):
        counts[ids[i]] += 1


@kernel
def count_valid(ids, valid, counts):
    for i in range(len(ids)):
        if valid[i]:
            counts[ids[i]] += 1


@kernel
def sum_int(ids, values, valid, sums, counts):
    """False on overflow: the signs of both addends agree and differ from the result's."""
    for i in range(len(ids)):
        if valid[i]:
            g = ids[i]
            a = sums[g]
            b = values[i]
            r = a + b
            if ((a ^ r) & (b ^ r)) < 0:
                return False
            sums[g] = r
            counts[g] += 1
    return True


@kernel
def sum_int_no_nulls(ids, values, sums):
    """sum_int for a column without NULLs: no validity to read and no count per value (its
    counts are the rows per group, which the caller counts once for every such column).
    Each row's count was a second read-modify-write on the group's state; TPC-H Q1 sums
    six NULL-free columns over 6M rows in 4 groups."""
    for i in range(len(ids)):
        g = ids[i]
        a = sums[g]
        b = values[i]
        r = a + b
        if ((a ^ r) & (b ^ r)) < 0:
            return False
        sums[g] = r
    return True


@kernel
def sum_float(ids, values, valid, sums, counts):
    """Added in row order."""
    for i in range(len(ids)):
        if valid[i]:
            g = ids[i]
            sums[g] += values[i]
            counts[g] += 1


@kernel
def min_int(ids, values, valid, states, counts):
    for i in range(len(ids)):
        if valid[i]:
            g = ids[i]
            if counts[g] == 0 or values[i] < states[g]:
                states[g] = values[i]
            counts[g] += 1


@kernel
def max_int(ids, values, valid, states, counts):
    for i in range(len(ids)):
        if valid[i]:
            g = ids[i]
            if counts[g] == 0 or values[i] > states[g]:
                states[g] = values[i]
            counts[g] += 1
