"""The compiled hash tables against a Python dict: ids, lookups, chains and pairs, including
keys chosen to collide in every table size a test reaches."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.kernels import hash_table as ht
from plansight.engine.physical.joins.key_index import KeyIndex, byte_buffers


def _colliding_ints(count: int, bits: int) -> np.ndarray:
    """``count`` keys whose hashes agree in their low ``bits`` bits: they share a slot (and
    probe each other's) in every table of up to 2**bits slots."""
    rng = np.random.default_rng(3)
    found: dict[int, list[int]] = {}
    while True:
        for value in rng.integers(-(1 << 62), 1 << 62, 4096).tolist():
            low = int(ht.hash_int(value)) & ((1 << bits) - 1)
            found.setdefault(low, []).append(value)
            if len(found[low]) == count:
                return np.array(found[low], dtype=np.int64)


def _reference_ids(values, valid):
    ids, seen = [], {}
    for v, ok in zip(values.tolist(), valid.tolist()):
        ids.append(seen.setdefault(v, len(seen)) if ok else -1)
    return np.array(ids, dtype=np.int64)


@pytest.mark.parametrize("case", ["random", "colliding", "runs", "extremes", "empty",
                                  "all_null"])
def test_int_factorize_and_lookup_equal_a_dict(case):
    rng = np.random.default_rng(7)
    if case == "random":
        values = rng.integers(-50, 5000, 20000)
    elif case == "runs":  # clustered keys, as in a sorted file: the run shortcut
        values = np.repeat(rng.integers(-20, 20, 300), rng.integers(1, 6, 300))
    elif case == "colliding":
        values = np.repeat(_colliding_ints(12, 10), 3)
        rng.shuffle(values)
    elif case == "extremes":
        values = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1, 1, 0, -1,
                           np.iinfo(np.int64).min], dtype=np.int64)
    else:
        values = np.zeros(0 if case == "empty" else 5, dtype=np.int64)
    values = values.astype(np.int64)
    valid = rng.random(len(values)) > 0.1 if case != "all_null" else np.zeros(len(values), bool)
    ids, table, uniques = ht.int_factorize(values, valid)
    assert ids.tolist() == _reference_ids(values, valid).tolist()
    assert uniques.tolist() == list(dict.fromkeys(values[valid].tolist()))
    probes = np.concatenate([values, values + 1, _colliding_ints(20, 10)])
    probe_valid = np.ones(len(probes), dtype=bool)
    probe_valid[::7] = False
    got = ht.int_lookup(probes, probe_valid, table)
    position = {v: i for i, v in enumerate(uniques.tolist())}
    want = [position.get(v, -1) if ok else -1 for v, ok in zip(probes.tolist(),
                                                               probe_valid.tolist())]
    assert got.tolist() == want


def test_bytes_factorize_and_lookup_equal_a_dict():
    rng = np.random.default_rng(9)
    words = ["", "a", "ab", "ba", "abc", "é", "a\x00b", "a\x00", "x" * 300]
    build = pa.array([words[i] if i >= 0 else None for i in rng.integers(-1, len(words), 500)],
                     pa.string()).slice(3)  # a slice: offsets that do not start at 0
    probe = pa.array(words + ["zz", "abcd", None], pa.large_string())
    valid = np.asarray(build.is_valid())
    ids, slots, first, hashes = ht.bytes_factorize(*byte_buffers(build), valid)
    values = build.to_pylist()
    seen: dict[str, int] = {}
    assert ids.tolist() == [seen.setdefault(v, len(seen)) if v is not None else -1
                            for v in values]
    got = ht.bytes_lookup(*byte_buffers(probe), np.asarray(probe.is_valid()), slots, first,
                          hashes, *byte_buffers(build))
    assert got.tolist() == [seen.get(v, -1) if v is not None else -1 for v in probe.to_pylist()]


def test_group_rows_and_expand_chain_duplicates_in_row_order():
    ids = np.array([2, -1, 0, 2, 2, 1, -1, 0], dtype=np.int64)
    starts, counts, order = ht.group_rows(ids, 3)
    assert counts.tolist() == [2, 1, 3] and order.tolist() == [2, 7, 5, 0, 3, 4]
    probe_rows, build_rows = ht.expand(np.array([2, -1, 0, 1], dtype=np.int64), starts, counts,
                                       order)
    assert list(zip(probe_rows.tolist(), build_rows.tolist())) == \
        [(0, 0), (0, 3), (0, 4), (2, 2), (2, 7), (3, 5)]
    assert ht.match_counts(np.array([2, -1, 1]), counts).tolist() == [3, 0, 1]


def _pairs(build_keys, probe_keys, null_equal=False):
    index = KeyIndex(build_keys, null_equal)
    codes, _ = index.probe_codes(probe_keys)
    probe_rows, build_rows = index.matches(codes)
    return sorted(zip(probe_rows.tolist(), build_rows.tolist()))


def _reference_pairs(build_rows, probe_rows, null_equal=False):
    def usable(row):
        return null_equal or None not in row
    return sorted((i, j) for i, p in enumerate(probe_rows) for j, b in enumerate(build_rows)
                  if usable(p) and usable(b) and p == b)


@pytest.mark.parametrize("type_", [pa.int32(), pa.int64(), pa.uint64(), pa.date32(),
                                   pa.timestamp("us"), pa.bool_(), pa.decimal128(12, 2),
                                   pa.string(), pa.large_binary(), pa.float64()])
def test_key_index_pairs_for_every_key_kind(type_):
    rng = np.random.default_rng(1)
    raw = [None if r < 0 else int(r) for r in rng.integers(-1, 6, 60)]

    def column(values):
        if pa.types.is_boolean(type_):
            return pa.array([None if v is None else v % 2 == 0 for v in values], type_)
        if pa.types.is_decimal(type_):
            from decimal import Decimal
            return pa.array([None if v is None else Decimal(v) / 4 for v in values], type_)
        if pa.types.is_string(type_) or pa.types.is_binary(type_) or \
                pa.types.is_large_binary(type_):
            return pa.array([None if v is None else f"k{v}".encode() for v in values], type_)
        if pa.types.is_floating(type_):
            return pa.array([None if v is None else v / 3 for v in values], type_)
        if pa.types.is_date(type_):
            return pa.array(values, pa.int32()).cast(type_)
        return pa.array(values, pa.int64()).cast(type_)

    build, probe = column(raw[:30]), column(raw[30:])
    assert _pairs([build], [probe]) == _reference_pairs(
        [(v,) for v in build.to_pylist()], [(v,) for v in probe.to_pylist()])


def test_float_keys_negative_zero_and_nan_are_one_key_each():
    build = pa.array([0.0, float("nan"), 1.5, None])
    probe = pa.array([-0.0, float("nan"), 1.5, None, 2.0])
    assert _pairs([build], [probe]) == [(0, 0), (1, 1), (2, 2)]


def test_null_equal_keys_match_null():
    build = [pa.array([1, None, 2, None]), pa.array(["a", "b", None, "b"])]
    probe = [pa.array([None, 2, 1, None]), pa.array(["b", None, "a", "a"])]
    rows_b = list(zip(*(k.to_pylist() for k in build)))
    rows_p = list(zip(*(k.to_pylist() for k in probe)))
    assert _pairs(build, probe, null_equal=True) == _reference_pairs(rows_b, rows_p, True)
    assert _pairs(build, probe) == _reference_pairs(rows_b, rows_p)


def test_composite_keys_with_colliding_and_dictionary_columns():
    keys = _colliding_ints(6, 10)
    rng = np.random.default_rng(2)
    a = pa.array(rng.choice(keys, 80))
    b = pa.array(rng.choice(["x", "y", None], 80)).dictionary_encode()
    build, probe = [a.slice(0, 40), b.slice(0, 40)], [a.slice(40), b.slice(40)]
    assert _pairs(build, probe) == _reference_pairs(
        list(zip(*(k.to_pylist() for k in build))), list(zip(*(k.to_pylist() for k in probe))))


def test_empty_build_or_probe():
    empty = pa.array([], pa.int64())
    assert _pairs([empty], [pa.array([1, None])]) == []
    assert _pairs([pa.array([1, 1])], [empty]) == []
    assert _pairs([empty, pa.array([], pa.string())], [pa.array([1]), pa.array(["a"])]) == []


@pytest.mark.parametrize("case", ["sorted_runs", "random", "with_nulls", "empty", "extremes"])
def test_range_factorize_and_lookup_equal_a_dict(case):
    rng = np.random.default_rng(11)
    values = {"sorted_runs": np.repeat(np.arange(100, 400), 3),
              "random": rng.integers(-50, 50, 2000),
              "with_nulls": rng.integers(0, 30, 500),
              "empty": np.zeros(0),
              "extremes": np.array([5, 6, 7])}[case].astype(np.int64)
    valid = rng.random(len(values)) > 0.2 if case == "with_nulls" else \
        np.ones(len(values), dtype=bool)
    low = int(values.min()) if len(values) else 0
    size = int(values.max()) - low + 1 if len(values) else 1
    ids, table, uniques = ht.range_factorize(values, valid, low, size)
    assert table.dtype == np.int32  # 4 bytes per slot: the table spans the key range
    assert ids.tolist() == _reference_ids(values, valid).tolist()
    assert uniques.tolist() == list(dict.fromkeys(values[valid].tolist()))
    info = np.iinfo(np.int64)
    probes = np.concatenate([values, values + 1, values - 1,
                             np.array([info.min, info.max, low - 1, low + size], np.int64)])
    got = ht.range_lookup(probes, np.ones(len(probes), bool), table, low)
    position = {v: i for i, v in enumerate(uniques.tolist())}
    assert got.tolist() == [position.get(v, -1) for v in probes.tolist()]


def test_group_ids_number_rows_with_nulls_as_a_group():
    from plansight.engine.kernels.keys import group_ids

    rng = np.random.default_rng(2)
    a = [None if x == 0 else int(x) for x in rng.integers(0, 4, 400)]
    b = [None if x == 0 else f"v{x}" for x in rng.integers(0, 3, 400)]
    c = [int(x) << 40 for x in rng.integers(0, 3, 400)]  # wide: hashed, not a range
    for keys in ([a], [b], [c], [a, b], [a, b, c]):
        arrays = [pa.chunked_array([pa.array(k[:150]), pa.array(k[150:])]) for k in keys]
        ids, groups = group_ids(arrays)
        rows = list(zip(*keys))
        reference = first_appearance_numbers(rows)
        assert groups == len(reference)
        # the same partition of the rows (ids may be numbered differently)
        pairs = set(zip(ids.tolist(), [reference[row] for row in rows]))
        assert len(pairs) == groups


def first_appearance_numbers(rows: list[tuple]) -> dict[tuple, int]:
    """Each distinct row numbered in order of first appearance: the reference grouping."""
    numbers: dict[tuple, int] = {}
    for row in rows:
        numbers.setdefault(row, len(numbers))
    return numbers


def test_short_strings_pack_into_distinct_integers():
    """Keys of up to 7 bytes become int64s: equal only when the bytes and lengths are."""
    from plansight.engine.kernels.keys import byte_buffers, short_bytes

    values = ["", "a", "a\x00", "\x00", "\x00a", "ab", "ba", "abcdefg", "\xff" * 3, "é", None]
    array = pa.array(values)
    valid = np.asarray(array.is_valid(), dtype=bool)
    packed, short = ht.pack_short_bytes(*byte_buffers(array), valid)
    assert short and short_bytes(array)
    kept = packed[valid].tolist()
    assert len(set(kept)) == len(kept) and min(kept) >= 0
    longer = pa.array(["ab", None, "abcdefgh"])
    _, short = ht.pack_short_bytes(*byte_buffers(longer), np.array([True, False, True]))
    assert not short and not short_bytes(longer)
    # a long value under a NULL is not read: the valid ones still pack
    _, short = ht.pack_short_bytes(*byte_buffers(longer), np.array([True, True, False]))
    assert short


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.binary()])
def test_short_bytes_read_offsets_of_either_width_as_they_are(kind):
    """Unwidened int32 offsets (no copy) pack and measure as widened int64 ones do, also for
    a slice whose offsets do not start at 0; the longest value is found without a lengths
    array."""
    from plansight.engine.kernels.keys import byte_buffers

    values = ["ab", None, "", "abcdefg", "x", "abcdefgh", "yz"]
    array = pa.array(values, kind)
    for piece in (array, array.slice(2, 3), array.slice(5), array.slice(0, 0)):
        narrow, data = byte_buffers(piece, widen=False)
        wide, _ = byte_buffers(piece)
        assert wide.dtype == np.int64
        if len(piece):  # an empty key has no buffers to read: int64 [0]
            assert narrow.dtype == (np.int64 if kind == pa.large_string() else np.int32)
        lengths = [len(v) for v in piece.to_pylist() if v is not None]
        assert ht.longest_bytes(narrow) == ht.longest_bytes(wide) == max(lengths, default=0)
        valid = np.asarray(piece.is_valid(), dtype=bool)
        got, got_short = ht.pack_short_bytes(narrow, data, valid)
        expected, expected_short = ht.pack_short_bytes(wide, data, valid)
        assert got_short == expected_short == (max(lengths, default=0) <= 7)
        if got_short:
            assert got.tolist() == expected.tolist()


def test_group_ids_of_short_strings_and_small_ints_match_a_reference():
    """The joint range numbering (short strings packed, columns combined by their spans)
    groups as the column-by-column numbering does, NULLs a value of their own, also past
    one chunk and with a long string that sends a column back to byte hashing."""
    from plansight.engine.kernels.keys import group_ids

    rng = np.random.default_rng(5)
    flags = [None if x == 0 else "ANR"[x - 1] for x in rng.integers(0, 4, 500)]
    modes = [None if x == 0 else ["MAIL", "SHIP", "AIR", "REG AIR"][x - 1]
             for x in rng.integers(0, 5, 500)]
    years = [None if x == 0 else 1990 + int(x) for x in rng.integers(0, 8, 500)]
    names = ["a much longer name" if x == 0 else "n" for x in rng.integers(0, 5, 500)]
    for keys in ([flags, modes], [flags, years], [modes, years, flags], [flags, names]):
        arrays = [pa.chunked_array([pa.array(k[:170]), pa.array(k[170:])]) for k in keys]
        ids, groups = group_ids(arrays)
        rows = list(zip(*keys))
        reference = first_appearance_numbers(rows)
        assert groups == len(reference)
        # numbered in order of first appearance, as the column-by-column path numbers them
        assert ids.tolist() == [reference[row] for row in rows]


def test_joint_range_codes_of_null_only_constant_and_negative_columns():
    """The compiled span and code passes: a column of NULLs only (its span one code), a
    constant column (width 1) and negative values number as the reference does, and the
    span kernel reports (low, high, valid rows) of the valid values only."""
    from plansight.engine.kernels.keys import _joint_range_codes, group_ids

    values = np.array([5, -3, 99, 7, -3], dtype=np.int64)
    valid = np.array([True, True, False, True, True])
    assert ht.valid_span(values, valid) == (-3, 7, 4)
    assert ht.valid_span(values, np.zeros(5, bool))[2] == 0
    rng = np.random.default_rng(9)
    negative = [None if x == 0 else -int(x) for x in rng.integers(0, 5, 300)]
    nothing = [None] * 300
    constant = [7] * 300
    for keys in ([nothing, negative], [negative, constant, nothing], [constant, negative]):
        arrays = [pa.array(k, pa.int64()) for k in keys]
        codes, span = _joint_range_codes(arrays)
        assert 0 <= codes.min() and codes.max() < span
        ids, groups = group_ids(arrays)
        rows = list(zip(*keys))
        reference = first_appearance_numbers(rows)
        assert groups == len(reference)
        assert ids.tolist() == [reference[row] for row in rows]
