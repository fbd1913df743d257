"""Realign Arrow data that arrived from elsewhere (a socket, a pickle, a mapped file).

Arrow's compute (Acero) expects each buffer aligned for its type (16 bytes for a decimal);
bytes received over the wire sit wherever the comm put them, and Acero warns about, then
copies, every misaligned buffer it meets -- once per operator, by the thousand. A table is
checked once (one pass over its buffer addresses) and, only if some buffer is misaligned,
copied once through Arrow's IPC reader, which copies exactly the misaligned buffers.
"""

from __future__ import annotations

import pyarrow as pa
from pyarrow import ipc

#: What the IPC reader copies: buffers not aligned for their data type.
ALIGNED_READ = ipc.IpcReadOptions(ensure_alignment=ipc.Alignment.DataTypeSpecific)
_ALIGNMENT = 16  # the widest fixed-width type's (decimal128); buffers from Arrow are at 64


def _buffers_aligned(array: pa.Array) -> bool:
    if any(b is not None and b.address % _ALIGNMENT for b in array.buffers()):
        return False
    if isinstance(array, pa.DictionaryArray):
        return _buffers_aligned(array.dictionary)
    return True


def realigned(table: pa.Table) -> pa.Table:
    """``table`` itself when every buffer is aligned, else a copy whose buffers are.

    Example:
        >>> t = pa.table({"x": [1, 2, 3]})
        >>> realigned(t) is t
        True
    """
    if all(_buffers_aligned(chunk) for column in table.columns for chunk in column.chunks):
        return table
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return ipc.open_stream(sink.getvalue(), options=ALIGNED_READ).read_all()
