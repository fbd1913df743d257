"""Dictionary-encoded strings of one width decoded in one compiled pass.

    indices[i] ──k──▶ bytes k*w .. k*w + w of the dictionary's data ──▶ row i's w bytes
    offsets: 0, w, 2w, ... (every value w bytes long)

A Parquet scan reads small string columns as dictionaries and decodes them for the plan
(catalog.py ``normalize_batch``). Arrow's ``take`` of a string dictionary computes each
row's length and copies it on its own (~5 ns a row); flags and codes (TPC-H's
l_returnflag, l_linestatus, o_orderstatus) have a single width, so every offset is known
and each row is a copy of w bytes. The kernel releases the GIL (jit.py).
"""

from __future__ import annotations

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
    out_offsets, out_data, ok = gather_one_width(codes, data, width, len(dictionary))
    if not ok:
        return None
    return pa.Array.from_buffers(dictionary.type, len(indices),
                                 [None, pa.py_buffer(out_offsets), pa.py_buffer(out_data)])


@kernel
def gather_one_width(codes, data, width, count):
    """(int32 offsets, bytes, True) of the values ``codes`` pick from ``data`` (``count``
    values of ``width`` bytes each); False at the first code outside 0 .. count - 1."""
    n = len(codes)
    offsets = np.empty(n + 1, np.int32)
    out = np.empty(n * width, np.uint8)
    for i in range(n + 1):
        offsets[i] = i * width
    if width == 1:  # one-letter flags: a plain gather
        for i in range(n):
            k = codes[i]
            if k < 0 or k >= count:
                return offsets, out, False
            out[i] = data[k]
        return offsets, out, True
    for i in range(n):
        k = codes[i]
        if k < 0 or k >= count:
            return offsets, out, False
        start = k * width
        target = i * width
        for j in range(width):
            out[target + j] = data[start + j]
    return offsets, out, True
