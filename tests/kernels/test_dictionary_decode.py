"""Dictionary-encoded strings of one width decoded by the compiled gather
(engine/kernels/dictionary.py) equal Arrow's take; anything else is left to Arrow (None),
and Parquet scans that read flags as dictionaries return the stored strings."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps
from plansight.engine.kernels.dictionary import decode_one_width


@pytest.mark.parametrize("values, kind", [
    (["A", "N", "R"], pa.string()),
    (["abc", "xyz", "é1"], pa.string()),  # 3 bytes each, one of them two-byte UTF-8
    ([b"\x00\x01", b"\xff\x00"], pa.binary()),
    (["x" * 32], pa.string()),
])
@pytest.mark.parametrize("index_type", [pa.int8(), pa.int16(), pa.int32(), pa.int64()])
def test_one_width_decodes_as_take(values, kind, index_type):
    rng = np.random.default_rng(4)
    dictionary = pa.array(values, kind)
    indices = pa.array(rng.integers(0, len(values), 1000), index_type)
    for piece in (indices, indices.slice(7, 500), indices.slice(999)):
        got = decode_one_width(piece, dictionary)
        assert got is not None
        assert got.equals(dictionary.take(piece))
    sliced = pa.array(["zz"] + values, kind).slice(1)  # a dictionary not starting at 0
    got = decode_one_width(indices, sliced)
    assert got is not None and got.equals(sliced.take(indices))


@pytest.mark.parametrize("dictionary, indices", [
    (pa.array(["MAIL", "AIR"]), pa.array([0, 1], pa.int32())),          # two widths
    (pa.array(["", ""]), pa.array([0, 1], pa.int32())),                  # empty strings
    (pa.array(["a", None]), pa.array([0, 1], pa.int32())),               # a NULL value
    (pa.array(["a", "b"]), pa.array([0, None], pa.int32())),             # a NULL index
    (pa.array(["a", "b"]), pa.array([0, 2], pa.int32())),                # out of range
    (pa.array(["a", "b"]), pa.array([-1, 0], pa.int32())),
    (pa.array(["x" * 33]), pa.array([0], pa.int32())),                   # too wide
    (pa.array([], pa.string()), pa.array([], pa.int32())),
    (pa.array(["a"], pa.large_string()), pa.array([0], pa.int32())),
])
def test_anything_else_is_left_to_arrow(dictionary, indices):
    assert decode_one_width(indices, dictionary) is None


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
def test_parquet_flags_read_as_dictionaries(tmp_path, monkeypatch, partitions, batch_size):
    """Small string columns read as dictionaries (one width, and with NULLs: Arrow's path)
    come back as stored, grouped and filtered."""
    from plansight.engine import catalog

    decoded = []

    def counting(indices, dictionary):
        result = decode_one_width(indices, dictionary)
        decoded.append(result is not None)
        return result

    monkeypatch.setattr(catalog, "decode_one_width", counting)
    rng = np.random.default_rng(8)
    n = 3000
    flag = [["A", "N", "R"][int(x)] for x in rng.integers(0, 3, n)]
    mode = [None if x == 0 else ["MAIL", "AIR", "TRUCK"][int(x) - 1]
            for x in rng.integers(0, 4, n)]
    table = pa.table({"k": pa.array(range(n), pa.int64()), "flag": flag, "mode": mode})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=700)
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register_parquet("t", str(tmp_path / "t.parquet"))
    rows = session.sql("SELECT k, flag, mode FROM t WHERE k % 3 <> 1 ORDER BY k").to_arrow()
    assert rows.to_pylist() == [r for r in table.to_pylist() if r["k"] % 3 != 1]
    grouped = session.sql("SELECT flag, mode, count(*) AS n FROM t GROUP BY flag, mode")
    counts = {(r["flag"], r["mode"]): r["n"] for r in grouped.to_arrow().to_pylist()}
    expected: dict = {}
    for f, m in zip(flag, mode):
        expected[(f, m)] = expected.get((f, m), 0) + 1
    assert counts == expected
    assert any(decoded) and not all(decoded)  # flag by the gather, mode by Arrow


def test_decoded_arrays_share_offsets_that_tell_their_width():
    """Decoded arrays take their offsets from one shared sequence per width, which
    ``known_width`` recognizes (slices too) without a pass; arrays Arrow made do not, and
    arrays decoded before a longer batch grew the sequence keep their width and values."""
    from plansight.engine.kernels.dictionary import _OFFSETS, known_width
    from plansight.engine.kernels.keys import group_ids, one_byte_values, short_bytes

    rng = np.random.default_rng(2)
    flags = pa.array(["A", "N", "R"])
    brands = pa.array(["Brand#12", "Brand#55"])
    small = pa.array(rng.integers(0, 3, 100), pa.int32())
    a = decode_one_width(small, flags)
    b = decode_one_width(pa.array(rng.integers(0, 2, 50), pa.int8()), brands)
    assert known_width(a) == 1 and known_width(a.slice(10, 20)) == 1
    assert known_width(b) == 8 and not short_bytes(b)
    assert short_bytes(a)
    assert known_width(pa.concat_arrays([a, a])) is None
    assert known_width(a.take(pa.array([0, 2]))) is None
    assert known_width(pa.array(["A"])) is None and known_width(a.slice(0, 0)) is None
    rows = 2 * _sequence_rows() + 5  # grows the shared sequence
    big_indices = pa.array(rng.integers(0, 3, rows), pa.int32())
    big = decode_one_width(big_indices, flags)
    assert big.equals(flags.take(big_indices)) and known_width(big) == 1
    assert a.equals(flags.take(small)) and known_width(a) == 1
    column = pa.chunked_array([a.slice(5), big, a.slice(0, 3)])
    expected = pa.chunked_array([flags.take(small).slice(5), flags.take(big_indices),
                                 flags.take(small).slice(0, 3)])
    assert one_byte_values(column).tobytes() == "".join(expected.to_pylist()).encode()
    ids, groups = group_ids([column])
    want, want_groups = group_ids([pa.array(expected.to_pylist())])
    assert groups == want_groups and ids.tolist() == want.tolist()
    assert len(_OFFSETS.spans) >= 2


def _sequence_rows() -> int:
    from plansight.engine.kernels.dictionary import _OneWidthOffsets

    return _OneWidthOffsets.MIN_ROWS
