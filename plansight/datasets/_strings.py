"""Vectorized builders of Arrow string columns from numpy arrays.

Every generator in this package builds strings column-at-a-time: fixed-width formatted
numbers as a byte matrix, and comments or addresses as slices of one shared byte pool.
No Python loop runs per row.

Slices of a pool overlap and come in random order, which a ``string`` array (monotonic
offsets) cannot express without copying. A ``string_view`` array can: each 16-byte view
holds (length, 4-byte prefix, buffer index, offset), or the bytes themselves when they fit
in 12. The views are assembled in numpy and Arrow's cast to ``string`` does the one copy::

    pool:  |the slyly regular deposits haggle. carefully final ...|
               ^off[0]   len[0]            ^off[1]   len[1]
    views: [len | prefix | 0 | off] ...  --cast-->  string array (contiguous)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_INLINE = 12  # string_view keeps strings of at most 12 bytes inside the view itself


def pool_slices(pool: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                chunk_rows: int = 1 << 20) -> pa.ChunkedArray:
    """Strings ``pool[offsets[i] : offsets[i] + lengths[i]]`` as a ``pa.string()`` column.

    ``pool`` is a uint8 array of ASCII bytes shorter than 2 GiB. Rows are built in chunks of
    ``chunk_rows`` so that neither the scratch views nor one chunk's 32-bit offsets overflow.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(pool) >= 2**31:
        raise ValueError("pool must be smaller than 2 GiB")
    if len(offsets) and (int((offsets + lengths).max()) > len(pool)
                         or int(offsets.min()) < 0 or int(lengths.min()) < 0):
        raise ValueError("pool slice out of range")
    pool = np.ascontiguousarray(pool, dtype=np.uint8)
    pool_buffer = pa.py_buffer(pool)
    padded = np.concatenate([pool, np.zeros(_INLINE, dtype=np.uint8)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, _INLINE)
    chunks = [
        _views_to_strings(windows, pool_buffer, offsets[start:start + chunk_rows],
                          lengths[start:start + chunk_rows])
        for start in range(0, max(len(offsets), 1), chunk_rows)
    ]
    return pa.chunked_array(chunks, pa.string())


def _views_to_strings(windows: np.ndarray, pool_buffer: pa.Buffer, offsets: np.ndarray,
                      lengths: np.ndarray) -> pa.StringArray:
    n = len(offsets)
    offsets32 = offsets.astype(np.int32)
    lengths32 = lengths.astype(np.int32)
    views = np.empty((n, 16), dtype=np.uint8)
    words = views.view(np.int32)  # (n, 4): length, prefix, buffer index, offset
    # Bytes 4..16 first get the 12 bytes at the offset: the inline payload of a short string,
    # and (in bytes 4..8) the prefix of a long one, whose last 8 bytes are then overwritten.
    views[:, 4:16] = windows[offsets32]
    words[:, 0] = lengths32
    long_rows = lengths32 > _INLINE
    words[:, 2] = np.where(long_rows, 0, words[:, 2])
    words[:, 3] = np.where(long_rows, offsets32, words[:, 3])
    short = np.flatnonzero(~long_rows)
    if len(short):  # inline bytes past the length must be zero (the format requires it)
        views[short, 4:16] *= np.arange(_INLINE) < lengths32[short, None]
    array = pa.Array.from_buffers(pa.string_view(), n, [None, pa.py_buffer(views), pool_buffer])
    return array.cast(pa.string())


def random_slices(rng: np.random.Generator, pool: np.ndarray, n: int, min_length: int,
                  max_length: int) -> pa.ChunkedArray:
    """``n`` random substrings of ``pool`` with lengths uniform in [min_length, max_length]."""
    lengths = rng.integers(min_length, max_length + 1, size=n)
    offsets = rng.integers(0, len(pool) - lengths + 1)
    return pool_slices(pool, offsets, lengths)


Piece = bytes | tuple[np.ndarray, int]


def fixed_width(pieces: Sequence[Piece], n: int) -> pa.StringArray:
    """Fixed-width strings glued from literal bytes and zero-padded numbers.

    Each piece is either ``b"literal"`` or ``(numbers, digits)``; for example
    ``[b"Supplier#", (keys, 9)]`` gives ``"Supplier#000000001"``.
    """
    columns: list[np.ndarray] = []
    for piece in pieces:
        if isinstance(piece, bytes):
            literal = np.frombuffer(piece, dtype=np.uint8)
            columns.append(np.broadcast_to(literal, (n, len(literal))))
        else:
            numbers, digits = piece
            numbers = np.asarray(numbers, dtype=np.int64)
            powers = 10 ** np.arange(digits - 1, -1, -1, dtype=np.int64)
            columns.append(((numbers[:, None] // powers) % 10 + ord("0")).astype(np.uint8))
    matrix = np.ascontiguousarray(np.concatenate(columns, axis=1))
    width = matrix.shape[1]
    offsets = np.arange(n + 1, dtype=np.int64) * width
    if offsets[-1] >= 2**31:
        raise ValueError("fixed-width column larger than 2 GiB")
    return pa.StringArray.from_buffers(
        n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(matrix)
    )


def take_strings(vocabulary: Sequence[str], codes: np.ndarray) -> pa.StringArray:
    """``vocabulary[codes]`` as a string array, gathered by Arrow."""
    return pa.array(list(vocabulary), pa.string()).take(pa.array(codes))
