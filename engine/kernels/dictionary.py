"""Dictionary-encoded strings of one width decoded in one compiled pass.

    indices[i] ──k──▶ bytes k*w .. k*w + w of the dictionary's data ──▶ row i's w bytes
    offsets: 0, w, 2w, ... (every value w bytes long)

A Parquet scan reads small string columns as dictionaries and decodes them for the plan
(catalog.py ``normalize_batch``). Arrow's ``take`` of a string dictionary computes each
row's length and copies it on its own (~5 ns a row); flags and codes (TPC-H's
l_returnflag, l_linestatus, o_orderstatus) have a single width, so every offset is known
and each row is a copy of w bytes. The kernel releases the GIL (jit.py).

Their offsets are not written per array: every decoded array of width w takes a slice of one
shared, never freed int32 buffer 0, w, 2w, ... (``_OneWidthOffsets``). Besides the writes,
that tells the group key kernels the width without a pass over the offsets
(``known_width``): TPC-H Q1's aggregate read its two flags' offsets twice per chunk to learn
what the scan knew.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from plansight.engine.kernels.jit import kernel

#: the widest value decoded here (longer ones: Arrow's take)
MAX_WIDTH = 32


def decode_one_width(indices: pa.Array, dictionary: pa.Array) -> pa.Array | None:
    """``dictionary.take(indices)`` when every dictionary value is a non-NULL string (or
    binary) of one length from 1 to ``MAX_WIDTH`` bytes and no index is NULL; else None
    (the caller takes Arrow's path, which also reports bad indices)."""
    if not (dictionary.type == pa.string() or dictionary.type == pa.binary()) or \
            len(dictionary) == 0 or dictionary.null_count or indices.null_count or \
            not pa.types.is_integer(indices.type) or len(indices) == 0:
        return None
    offsets = np.frombuffer(dictionary.buffers()[1], dtype=np.int32)[
        dictionary.offset:dictionary.offset + len(dictionary) + 1]
    width = int(offsets[1] - offsets[0])
    if len(indices) * width >= 1 << 31:  # past int32 offsets
        return None
    if not 1 <= width <= MAX_WIDTH or int(offsets[-1] - offsets[0]) != width * len(dictionary) \
            or not bool(np.all(np.diff(offsets) == width)):
        return None
    data = np.frombuffer(dictionary.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    codes = np.frombuffer(indices.buffers()[1], dtype=indices.type.to_pandas_dtype())[
        indices.offset:indices.offset + len(indices)]
    out_data, ok = gather_one_width(codes, data, width, len(dictionary))
    if not ok:
        return None
    return pa.Array.from_buffers(dictionary.type, len(indices),
                                 [None, _OFFSETS.of(len(indices), width),
                                  pa.py_buffer(out_data)])


def known_width(array: pa.Array) -> int | None:
    """The length of every value of a string or binary ``array`` when its offsets are a
    slice of a shared one-width sequence (arrays ``decode_one_width`` made, or slices of
    them), else None: then only a pass over the offsets can tell. An address test, no pass."""
    if len(array) == 0 or not (array.type == pa.string() or array.type == pa.binary()):
        return None
    return _OFFSETS.width_at(array.buffers()[1].address)


class _OneWidthOffsets:
    """Per width, int32 offsets 0, w, 2w, ... shared by every decoded array of that width,
    each taking a slice. A longer batch makes a longer sequence (at least twice as long);
    the older ones stay allocated, so that no other buffer can reuse their addresses and be
    taken for one (``width_at``): a few MiB at most, for batches of a million rows."""

    MIN_ROWS = 1 << 16

    def __init__(self):
        self.current: dict[int, pa.Buffer] = {}
        # (start address, end address, width, the buffer: kept alive, its addresses ours)
        self.spans: list[tuple[int, int, int, pa.Buffer]] = []
        self.lock = threading.Lock()

    def of(self, rows: int, width: int) -> pa.Buffer:
        """Offsets of ``rows`` values of ``width`` bytes."""
        size = 4 * (rows + 1)
        sequence = self.current.get(width)
        if sequence is None or sequence.size < size:
            with self.lock:
                sequence = self.current.get(width)
                if sequence is None or sequence.size < size:
                    previous = sequence.size // 4 - 1 if sequence is not None else 0
                    count = max(rows, 2 * previous, self.MIN_ROWS)
                    if count * width >= 1 << 31:
                        count = rows
                    sequence = pa.py_buffer(np.arange(count + 1, dtype=np.int32) * width)
                    self.spans = self.spans + [(sequence.address, sequence.address +
                                                sequence.size, width, sequence)]
                    self.current[width] = sequence
        return sequence.slice(0, size)

    def width_at(self, address: int) -> int | None:
        for start, end, width, _ in self.spans:
            if start <= address < end:
                return width
        return None


_OFFSETS = _OneWidthOffsets()


@kernel
def gather_one_width(codes, data, width, count):
    """(bytes, True) of the values ``codes`` pick from ``data`` (``count`` values of
    ``width`` bytes each); False at the first code outside 0 .. count - 1."""
    n = len(codes)
    out = np.empty(n * width, np.uint8)
    if width == 1:  # one-letter flags: a plain gather
        for i in range(n):
            k = codes[i]
            if k < 0 or k >= count:
                return out, False
            out[i] = data[k]
        return out, True
    for i in range(n):
        k = codes[i]
        if k < 0 or k >= count:
            return out, False
        start = k * width
        target = i * width
        for j in range(width):
            out[target + j] = data[start + j]
    return out, True
