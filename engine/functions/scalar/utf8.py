"""Per-row character slicing of UTF-8 string arrays in numpy.

Arrow's ``utf8_slice_codeunits`` takes one start/stop for the whole array; SQL's
``substring(s, start, len)`` with a negative start, a column start, or ``lpad`` to a
per-row width needs a different slice in every row. This module works on the raw buffers:

    bytes   h  é. .  l  l  o | w  o ...      (é is two bytes)
    start?  1  1  0  1  1  1 | 1  1          a byte starts a character unless it is 10xxxxxx
    before  0  1  2  2  3  4 | 5  6  7       starts before each byte (cumulative count)

so character ``c`` of row ``r`` is global character ``g = before[row offset] + c`` and starts
at the first byte ``k`` with ``before[k + 1] == g + 1`` (a binary search); a slice is then one
gather of bytes — no Python loop per row. ASCII data skips all of this.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _parts(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets as int64 relative to the data start, data bytes) of a string array."""
    if strings.type != pa.string():
        strings = strings.cast(pa.string())
    _, offset_buf, data_buf = strings.buffers()
    offsets = np.frombuffer(offset_buf, dtype=np.int32,
                            count=len(strings) + 1 + strings.offset)[strings.offset:]
    offsets = offsets.astype(np.int64)
    base = offsets[0]
    end = offsets[-1]
    data = (np.frombuffer(data_buf, dtype=np.uint8, count=end)[base:end]
            if data_buf is not None and end > base else np.zeros(0, dtype=np.uint8))
    return offsets - base, data


def char_positions(strings: pa.Array):
    """(byte offsets per row, data bytes, ``locate``, index of each row's first character),
    where ``locate(g)`` gives the byte position of global character number ``g`` (the data
    length for one past the last character). For ASCII data characters are bytes."""
    offsets, data = _parts(strings)
    if not len(data) or int(data.max()) < 0x80:
        return offsets, data, lambda g: np.asarray(g, dtype=np.int64), offsets[:-1]
    is_start = (data & 0xC0) != 0x80
    # int32 is enough (Arrow string data is < 2 GB) and several times faster to accumulate
    before = np.concatenate([np.zeros(1, dtype=np.int32), np.cumsum(is_start, dtype=np.int32)])

    def locate(g: np.ndarray) -> np.ndarray:
        # the g-th character starts at the first byte k with before[k + 1] == g + 1
        return np.searchsorted(before, np.asarray(g, dtype=np.int64) + 1, side="left") - 1 \
            if len(g) else np.zeros(0, dtype=np.int64)

    row_first_char = before[offsets[:-1]].astype(np.int64)
    return offsets, data, locate, row_first_char


def slice_chars(strings: pa.Array, start: np.ndarray, stop: np.ndarray) -> pa.Array:
    """Characters ``[start, stop)`` (0-based, clamped to each row) of every row.

    Example:
        >>> slice_chars(pa.array(["héllo", "ab"]), np.array([1, 0]), np.array([3, 9])).to_pylist()
        ['él', 'ab']
    """
    _, data, locate, first = char_positions(strings)
    lengths = np.asarray(pc.fill_null(pc.utf8_length(strings.cast(pa.string())), 0)
                         .to_numpy(zero_copy_only=False), dtype=np.int64)
    start = np.clip(np.asarray(start, dtype=np.int64), 0, lengths)
    stop = np.clip(np.asarray(stop, dtype=np.int64), start, lengths)
    byte_start = locate(first + start)
    byte_stop = locate(first + stop)
    sizes = byte_stop - byte_start
    new_offsets = np.concatenate([[0], np.cumsum(sizes)])
    total = int(new_offsets[-1])
    gather = np.arange(total, dtype=np.int64) - np.repeat(new_offsets[:-1] - byte_start, sizes)
    out_data = data[gather] if total else np.zeros(0, dtype=np.uint8)
    if new_offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError("string result larger than 2 GB")
    validity = strings.buffers()[0] if strings.null_count else None
    if validity is not None and strings.offset:
        validity = pa.array(np.asarray(strings.is_valid().to_numpy(zero_copy_only=False)))
        validity = validity.buffers()[1]
    return pa.Array.from_buffers(
        pa.string(), len(strings),
        [validity, pa.py_buffer(new_offsets.astype(np.int32).tobytes()),
         pa.py_buffer(out_data.tobytes())], null_count=strings.null_count)


def byte_to_char_index(strings: pa.Array, byte_index: np.ndarray) -> np.ndarray:
    """Character index of a byte position inside each row (both 0-based)."""
    offsets, data = _parts(strings)
    row_start = offsets[:-1]
    if not len(data) or int(data.max()) < 0x80:
        return np.clip(np.asarray(byte_index, dtype=np.int64), 0, offsets[1:] - row_start)
    is_start = (data & 0xC0) != 0x80
    before = np.concatenate([[0], np.cumsum(is_start, dtype=np.int32)]).astype(np.int64)
    target = np.clip(row_start + np.asarray(byte_index, dtype=np.int64), row_start,
                     offsets[1:])
    return before[target] - before[row_start]


def first_codepoint(strings: pa.Array) -> np.ndarray:
    """Unicode code point of each row's first character (0 for empty rows)."""
    offsets, data = _parts(strings)
    padded = np.concatenate([data, np.zeros(4, dtype=np.uint8)]).astype(np.int64)
    at = offsets[:-1]
    b0, b1, b2, b3 = (padded[at + i] for i in range(4))
    cp = np.where(b0 < 0x80, b0,
                  np.where(b0 < 0xE0, ((b0 & 0x1F) << 6) | (b1 & 0x3F),
                           np.where(b0 < 0xF0, ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6)
                                    | (b2 & 0x3F),
                                    ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12)
                                    | ((b2 & 0x3F) << 6) | (b3 & 0x3F))))
    return np.where(offsets[1:] > at, cp, 0)


def from_codepoints(codepoints: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A string array of one character per row from code points."""
    cp = np.asarray(codepoints, dtype=np.int64)
    size = np.where(cp < 0x80, 1, np.where(cp < 0x800, 2, np.where(cp < 0x10000, 3, 4)))
    size = np.where(valid, size, 0)
    offsets = np.concatenate([[0], np.cumsum(size)])
    out = np.zeros(int(offsets[-1]), dtype=np.uint8)
    at = offsets[:-1]
    one, two, three, four = size == 1, size == 2, size == 3, size == 4
    out[at[one]] = cp[one]
    out[at[two]] = 0xC0 | (cp[two] >> 6)
    out[at[two] + 1] = 0x80 | (cp[two] & 0x3F)
    out[at[three]] = 0xE0 | (cp[three] >> 12)
    out[at[three] + 1] = 0x80 | ((cp[three] >> 6) & 0x3F)
    out[at[three] + 2] = 0x80 | (cp[three] & 0x3F)
    out[at[four]] = 0xF0 | (cp[four] >> 18)
    out[at[four] + 1] = 0x80 | ((cp[four] >> 12) & 0x3F)
    out[at[four] + 2] = 0x80 | ((cp[four] >> 6) & 0x3F)
    out[at[four] + 3] = 0x80 | (cp[four] & 0x3F)
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid.astype(np.uint8),
                                                             bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(cp),
                                 [mask, pa.py_buffer(offsets.astype(np.int32).tobytes()),
                                  pa.py_buffer(out.tobytes())],
                                 null_count=int(len(cp) - np.count_nonzero(valid)))
