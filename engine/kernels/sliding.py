"""Fixed-width ROWS frames in one compiled pass per partition (van Herk / Gil-Werman).

``functions/window/sliding.py`` explains the scheme: every partition padded with identity
values, cut into blocks of the frame's width ``w``, each frame the op of a block suffix and
the next block's prefix. Its numpy form materializes the padded array, transposes it twice
(``w`` rows by blocks columns) and gathers twice -- on 150-row partitions with a 101-row
frame that was 40% of a moving SUM's CPU time. Here each partition's padded stretch is
walked in a scratch buffer that stays in cache, nothing padded is ever allocated, and the
blocks sit exactly where the numpy form puts them (multiples of ``w`` in the padded
coordinates) with every op applied in the same order: a float SUM rounds bit for bit as
before.

Ops are numbered (a ufunc cannot be passed to a kernel): ``OPS`` maps the numpy ufuncs to
them; MIN/MAX propagate NaN like ``np.minimum``/``np.maximum``, FMIN/FMAX ignore it like
``np.fmin``/``np.fmax``.
"""

from __future__ import annotations

import numpy as np

from plansight.engine.kernels.jit import kernel

ADD, MIN, FMIN, MAX, FMAX = range(5)

#: the numpy ufunc each op code stands for (bitwise ops, rare in windows, stay in numpy:
#: one kernel body must type for floats too)
OPS = {np.add: ADD, np.minimum: MIN, np.fmin: FMIN, np.maximum: MAX, np.fmax: FMAX}


@kernel
def _combine(op, a, b):
    if op == ADD:
        return a + b
    if op == MIN:  # NaN wins, as np.minimum
        if a != a:
            return a
        if b != b:
            return b
        return a if a <= b else b
    if op == FMIN:  # NaN loses, as np.fmin
        if b != b:
            return a
        if a != a:
            return b
        return a if a <= b else b
    if op == MAX:
        if a != a:
            return a
        if b != b:
            return b
        return a if a >= b else b
    # FMAX: NaN loses, as np.fmax
    if b != b:
        return a
    if a != a:
        return b
    return a if a >= b else b


#: padded slots per pass of ``sliding_frames`` (rounded up to whole blocks): its two
#: scratch arrays stay in cache
_SEGMENT_SLOTS = 16384


@kernel
def sliding_frames(values, partition_starts, before, after, op, identity):
    """``op`` over rows ``[i - before, i + after]`` of every row's partition (rows sorted by
    partition: ``partition_starts`` every partition's first row, then the row count), as
    ``functions.window.sliding.sliding_reduce`` computes it.

    A partition goes through in segments of whole blocks: the suffixes of a segment's
    slots, the prefixes up to one block past it, then the frames starting in it. Scratch
    arrays of a segment stay in cache whatever the partition's size (whole-partition
    arrays, 16 MB each for 2M rows, made 4x the rows cost 6x)."""
    n = len(values)
    out = np.empty(n, values.dtype)
    if n == 0:
        return out
    width = before + after + 1
    pad = before + after
    # at least a few blocks: each segment recomputes the prefixes of the block after it
    blocks = max(4, _SEGMENT_SLOTS // width)
    suffix = np.empty(blocks * width + width, values.dtype)
    prefix = np.empty(blocks * width + 2 * width + 1, values.dtype)
    for p in range(len(partition_starts) - 1):
        start = partition_starts[p]
        rows = partition_starts[p + 1] - start
        if rows == 0:
            continue
        # padded coordinate of the partition's first padding slot; blocks start at multiples
        # of width there, so the values below combine in the numpy form's exact order
        origin = start + pad * np.int64(p)
        span = rows + pad
        low = 0
        first_at = origin % width  # slot 0's place in its block
        while low < rows:
            # the segment [low, high) ends on a block boundary (or the padded end)
            high = min(low + blocks * width - (first_at if low == 0 else 0), span)
            # suffix[k - low]: op from k up to its block's last slot (accumulated downwards)
            acc = identity
            at = (origin + high - 1) % width
            for k in range(high - 1, low - 1, -1):
                x = values[start + k - before] if before <= k < before + rows else identity
                acc = x if at == width - 1 or k == high - 1 else _combine(op, acc, x)
                suffix[k - low] = acc
                at = width - 1 if at == 0 else at - 1
            # prefix[k - low]: op over k's block before k (identity at a block start), one
            # block past the segment: the frames starting in it end there
            acc = identity
            at = (origin + low) % width
            for k in range(low, min(high + width, span) + 1):
                if at == 0:
                    acc = identity
                else:
                    x = values[start + k - 1 - before] if before <= k - 1 < before + rows \
                        else identity
                    acc = x if at == 1 else _combine(op, acc, x)
                prefix[k - low] = acc
                at = 0 if at == width - 1 else at + 1
            for j in range(low, min(high, rows)):
                out[start + j] = _combine(op, suffix[j - low], prefix[j - low + width])
            low = high
    return out
