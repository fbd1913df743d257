"""Hand-checked frame-bound arithmetic, illegal frames, argument checks and return types."""

from __future__ import annotations

import datetime
import decimal
import doctest
import importlib

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.functions.window import (
    DEFAULT_FRAME_WITH_ORDER,
    WHOLE_PARTITION,
    FrameBound,
    FrameSpec,
    evaluate_window,
    frame_bounds,
    partition_layout,
    peer_groups,
    window_return_type,
)
from plansight.engine.functions.window.sparse_table import RangeExtremum
from plansight.errors import NotSupportedError, PlanError

UP, UF, CR = (FrameBound("unbounded_preceding"), FrameBound("unbounded_following"),
              FrameBound("current_row"))


def P(k):
    return FrameBound("preceding", k)


def F(k):
    return FrameBound("following", k)


# two partitions: rows 0..4 with keys 1 1 2 N N (NULLS LAST), rows 5..7 with keys 3 3 4
STARTS = np.array([0, 5, 8])
KEY = pa.array([1, 1, 2, None, None, 3, 3, 4])


def bounds(frame: FrameSpec, key=KEY, starts=STARTS, descending=False, nulls_first=False):
    layout = partition_layout(starts)
    peers = peer_groups(layout, [key])
    b = frame_bounds(frame, layout, peers, [key], [descending], [nulls_first])
    return b.start.tolist(), b.end.tolist()


def test_rows_bounds_clip_to_partition() -> None:
    assert bounds(FrameSpec("rows", P(1), F(1))) == (
        [0, 0, 1, 2, 3, 5, 5, 6], [2, 3, 4, 5, 5, 7, 8, 8])
    assert bounds(FrameSpec("rows", P(3), P(2))) == (
        [0, 0, 0, 0, 1, 5, 5, 5], [0, 0, 1, 2, 3, 5, 5, 6])
    assert bounds(FrameSpec("rows", F(2), UF)) == (
        [2, 3, 4, 5, 5, 7, 8, 8], [5, 5, 5, 5, 5, 8, 8, 8])
    assert bounds(FrameSpec("rows", UP, CR)) == (
        [0, 0, 0, 0, 0, 5, 5, 5], [1, 2, 3, 4, 5, 6, 7, 8])


def test_huge_rows_offset_does_not_overflow() -> None:
    assert bounds(FrameSpec("rows", P(2**62), F(2**62))) == (
        [0] * 5 + [5] * 3, [5] * 5 + [8] * 3)


def test_groups_bounds_use_peer_groups() -> None:
    # groups: {0,1} {2} {3,4} | {5,6} {7}
    assert bounds(FrameSpec("groups", P(1), CR)) == (
        [0, 0, 0, 2, 2, 5, 5, 5], [2, 2, 3, 5, 5, 7, 7, 8])
    assert bounds(FrameSpec("groups", F(1), F(1))) == (
        [2, 2, 3, 5, 5, 7, 7, 8], [3, 3, 5, 5, 5, 8, 8, 8])
    assert bounds(FrameSpec("groups", P(2), P(1))) == (
        [0, 0, 0, 0, 0, 5, 5, 5], [0, 0, 2, 3, 3, 5, 5, 7])


def test_range_current_row_is_the_peer_group() -> None:
    assert bounds(DEFAULT_FRAME_WITH_ORDER) == ([0] * 5 + [5] * 3, [2, 2, 3, 5, 5, 7, 7, 8])


def test_range_offsets_and_null_peers() -> None:
    # NULL keys: offset bounds are the NULL peer group; non-NULL rows never reach NULLs
    assert bounds(FrameSpec("range", P(1), F(0))) == (
        [0, 0, 0, 3, 3, 5, 5, 5], [2, 2, 3, 5, 5, 7, 7, 8])
    assert bounds(FrameSpec("range", F(1), UF)) == (
        [2, 2, 3, 3, 3, 7, 7, 8], [5, 5, 5, 5, 5, 8, 8, 8])
    assert bounds(FrameSpec("range", UP, P(1))) == (
        [0, 0, 0, 0, 0, 5, 5, 5], [0, 0, 2, 5, 5, 5, 5, 7])


def test_range_desc_nulls_first_flips_direction() -> None:
    key = pa.array([None, 5, 3, 3, 1])
    frame = FrameSpec("range", P(2), F(1))
    # DESC: PRECEDING means larger keys
    assert bounds(frame, key, np.array([0, 5]), descending=True, nulls_first=True) == (
        [0, 1, 1, 1, 2], [1, 2, 4, 4, 5])


def test_range_fractional_offset_is_exact() -> None:
    key = pa.array([1, 2, 2, 5])
    starts = np.array([0, 4])
    assert bounds(FrameSpec("range", P(0.6), CR), key, starts)[0] == [0, 1, 1, 3]
    assert bounds(FrameSpec("range", P(decimal.Decimal("1.0")), CR), key, starts)[0] == [
        0, 0, 0, 3]


def test_range_unsigned_and_int_saturate() -> None:
    key = pa.array([0, 1, 250], pa.uint8())
    assert bounds(FrameSpec("range", P(100), F(100)), key, np.array([0, 3])) == (
        [0, 0, 2], [2, 2, 3])
    key = pa.array([-2**63, 0, 2**63 - 1], pa.int64())
    assert bounds(FrameSpec("range", P(2**63), F(1)), key, np.array([0, 3])) == (
        [0, 0, 1], [1, 2, 3])


def test_range_date_months_clamp_day() -> None:
    key = pa.array([datetime.date(2024, 1, 31), datetime.date(2024, 2, 29),
                    datetime.date(2024, 3, 31)])
    frame = FrameSpec("range", P(pa.MonthDayNano([1, 0, 0])), CR)
    # Mar 31 - 1 month = Feb 29 (clamped)
    assert bounds(frame, key, np.array([0, 3]))[0] == [0, 0, 1]


def test_exclusion_segments() -> None:
    layout = partition_layout(np.array([0, 4]))
    key = pa.array([1, 2, 2, 3])
    peers = peer_groups(layout, [key])
    frame = FrameSpec("rows", UP, UF, "ties")
    b = frame_bounds(frame, layout, peers, [key], [False], [False])
    assert [(lo.tolist(), hi.tolist()) for lo, hi in b.segments] == [
        ([0, 0, 0, 0], [0, 1, 1, 3]), ([0, 1, 2, 3], [1, 2, 3, 4]), ([1, 3, 3, 4], [4, 4, 4, 4])]
    assert b.lengths().tolist() == [4, 3, 3, 4]


def test_empty_partitions_in_starts() -> None:
    starts = np.array([0, 0, 2, 2, 2, 5, 5])
    values = pa.array([1, 2, 3, None, 5])
    got = evaluate_window("sum", [values], partition_starts=starts, order_keys=[],
                          descending=[], nulls_first=[], frame=None)
    assert got.to_pylist() == [3, 3, 8, 8, 8]
    got = evaluate_window("dense_rank", [], partition_starts=starts, order_keys=[values],
                          descending=[False], nulls_first=[False], frame=None)
    assert got.to_pylist() == [1, 2, 1, 2, 3]
    got = evaluate_window("max", [values], partition_starts=starts, order_keys=[values],
                          descending=[False], nulls_first=[False],
                          frame=FrameSpec("groups", P(1), CR))
    assert got.to_pylist() == [1, 2, 3, 3, 5]


@pytest.mark.parametrize("spec", [
    FrameSpec("rows", P(2), CR), FrameSpec("rows", CR, F(3)), FrameSpec("rows", P(1), F(1)),
    FrameSpec("rows", UP, F(2)), FrameSpec("rows", P(4), UF), FrameSpec("rows", UP, UF),
    FrameSpec("rows", CR, CR), FrameSpec("rows", P(2**62), CR)])
@pytest.mark.parametrize("sizes", [[0], [1], [3, 0, 1], [2, 2, 2], [0, 7, 1, 0, 4], [5]])
def test_fixed_rows_frames_answer_from_the_spec_as_the_row_arrays_do(spec, sizes) -> None:
    """A fixed ROWS frame's whole-partition test, longest frame and lengths come from the
    spec and the partition sizes (no per-row bounds): they equal the row arrays' answers."""
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    fast = frame_bounds(spec, partition_layout(starts), None, [], [], [])
    rows = frame_bounds(spec, partition_layout(starts), None, [], [], [])
    start, end = rows.start, rows.end  # materialized first: the slow answers
    assert fast.fixed_extent is not None
    assert fast.is_whole_partition == (np.array_equal(start, rows.layout.row_partition_start)
                                       and np.array_equal(end, rows.layout.row_partition_end))
    assert fast.max_length == (int((end - start).max()) if len(start) else 0)
    assert fast.lengths().tolist() == (end - start).tolist()


def test_sliding_frames_count_and_null_where_nothing_contributes() -> None:
    """The sliding kernels skip the frame bounds: their counts (a sliding sum of the
    contributing flags) still make empty frames NULL and COUNT/AVG/STDDEV exact."""
    starts = np.array([0, 4, 4, 7])
    values = pa.array([None, None, 2.0, 4.0, None, 1.0, None])
    spec = FrameSpec("rows", P(1), CR)

    def run(func, filter_mask=None):
        return evaluate_window(func, [values], partition_starts=starts, order_keys=[],
                               descending=[], nulls_first=[], frame=spec,
                               filter_mask=filter_mask).to_pylist()
    assert run("sum") == [None, None, 2.0, 6.0, None, 1.0, 1.0]
    assert run("min") == [None, None, 2.0, 2.0, None, 1.0, 1.0]
    assert run("count") == [0, 0, 1, 2, 0, 1, 1]
    assert run("avg") == [None, None, 2.0, 3.0, None, 1.0, 1.0]
    assert run("stddev_samp")[:4] == [None, None, None, pytest.approx(2 ** 0.5)]
    keep = pa.array([True, True, False, True, True, True, True])
    assert run("sum", keep) == [None, None, None, 4.0, None, 1.0, 1.0]


@pytest.mark.parametrize("func,args", [
    ("row_number", []), ("rank", []), ("ntile", [pa.array([], pa.int64())]),
    ("lag", [pa.array([], pa.string())]), ("sum", [pa.array([], pa.float64())]),
    ("min", [pa.array([], pa.string())]), ("string_agg", [pa.array([], pa.string())]),
    ("count_star", []), ("first_value", [pa.array([], pa.int32())]),
])
def test_empty_input(func: str, args: list) -> None:
    frame = FrameSpec("range", P(1), CR)
    got = evaluate_window(func, args, partition_starts=np.array([0]),
                          order_keys=[pa.array([], pa.int64())], descending=[False],
                          nulls_first=[False], frame=frame)
    assert len(got) == 0
    assert got.type == window_return_type(func, [a.type for a in args])


def test_single_row() -> None:
    kwargs = {"partition_starts": np.array([0, 1]), "order_keys": [pa.array([3])],
              "descending": [False], "nulls_first": [False], "frame": None}
    assert evaluate_window("percent_rank", [], **kwargs).to_pylist() == [0.0]
    assert evaluate_window("var_samp", [pa.array([3.0])], **kwargs).to_pylist() == [None]
    assert evaluate_window("var_pop", [pa.array([3.0])], **kwargs).to_pylist() == [0.0]
    assert evaluate_window("lead", [pa.array([3])], **kwargs).to_pylist() == [None]
    assert evaluate_window("ntile", [pa.array([5])], **kwargs).to_pylist() == [1]


def test_scalar_arguments_are_broadcast() -> None:
    got = evaluate_window("lag", [pa.array([1, 2, 3]), pa.scalar(1), pa.scalar(0)],
                          partition_starts=np.array([0, 3]), order_keys=[], descending=[],
                          nulls_first=[], frame=None)
    assert got.to_pylist() == [0, 1, 2]


@pytest.mark.parametrize("make", [
    lambda: FrameSpec("rows", UF, UF),
    lambda: FrameSpec("rows", UP, UP),
    lambda: FrameSpec("rows", CR, P(1)),
    lambda: FrameSpec("range", F(1), P(1)),
    lambda: FrameSpec("groups", F(1), CR),
    lambda: FrameSpec("rows", P(-1), CR),
    lambda: FrameSpec("groups", CR, F(-2)),
    lambda: FrameSpec("range", P(-0.5), CR),
    lambda: FrameSpec("rows", P(float("inf")), CR),  # 'inf' is a RANGE offset only
    lambda: FrameSpec("range", P(float("-inf")), CR),
    lambda: FrameSpec("range", P(float("nan")), CR),
    lambda: FrameSpec("range", P(datetime.timedelta(days=-1)), CR),
    lambda: FrameSpec("range", P(pa.MonthDayNano([1, -40, 0])), CR),
    lambda: FrameSpec("rows", P("3"), CR),
    lambda: FrameSpec("rows", P(datetime.timedelta(days=1)), CR),
    lambda: FrameSpec("sideways", UP, CR),
    lambda: FrameSpec("rows", UP, CR, "others"),
    lambda: FrameBound("preceding"),
    lambda: FrameBound("current_row", 1),
    lambda: FrameBound("later"),
])
def test_illegal_frames_raise_plan_error(make) -> None:
    with pytest.raises(PlanError):
        make()


def _call(func, args, order_keys, frame, **kwargs):
    n = len(order_keys[0]) if order_keys else (len(args[0]) if args else 0)
    return evaluate_window(func, args, partition_starts=np.array([0, n]), order_keys=order_keys,
                           descending=[False] * len(order_keys),
                           nulls_first=[False] * len(order_keys), frame=frame, **kwargs)


def test_range_offset_needs_exactly_one_order_key() -> None:
    frame = FrameSpec("range", P(1), CR)
    with pytest.raises(PlanError, match="exactly one ORDER BY"):
        _call("count_star", [], [pa.array([1, 2]), pa.array([1, 2])], frame)
    with pytest.raises(PlanError, match="exactly one ORDER BY"):
        _call("count", [pa.array([1])], [], frame)
    with pytest.raises(PlanError, match="exactly one ORDER BY"):
        evaluate_window("count_star", [], partition_starts=np.array([0]), order_keys=[],
                        descending=[], nulls_first=[], frame=frame)


def test_range_offset_type_mismatch() -> None:
    with pytest.raises(PlanError):
        _call("count_star", [], [pa.array(["a", "b"])], FrameSpec("range", P(1), CR))
    with pytest.raises(PlanError):
        _call("count_star", [], [pa.array([1, 2])],
              FrameSpec("range", P(datetime.timedelta(days=1)), CR))
    with pytest.raises(PlanError):
        _call("count_star", [], [pa.array([datetime.datetime(2024, 1, 1)])],
              FrameSpec("range", P(1), CR))
    with pytest.raises(PlanError, match="must be an interval"):
        _call("count_star", [], [pa.array([datetime.time(1, 2)])], FrameSpec("range", P(1), CR))
    with pytest.raises(NotSupportedError):
        _call("count_star", [], [pa.array([datetime.timedelta(hours=2)])],
              FrameSpec("range", P(datetime.timedelta(hours=1)), CR))


def test_argument_errors() -> None:
    with pytest.raises(PlanError, match="Did you mean 'row_number'"):
        window_return_type("row_numbr", [])
    with pytest.raises(PlanError, match="takes 1 argument"):
        window_return_type("sum", [])
    with pytest.raises(PlanError):
        window_return_type("sum", [pa.string()])
    with pytest.raises(PlanError):
        window_return_type("bool_and", [pa.int32()])
    with pytest.raises(PlanError):
        window_return_type("nth_value", [pa.int32(), pa.float64()])
    with pytest.raises(PlanError, match="FILTER is not implemented"):
        _call("rank", [], [pa.array([1])], None, filter_mask=pa.array([True]))
    with pytest.raises(PlanError, match="IGNORE NULLS"):
        _call("sum", [pa.array([1])], [], None, ignore_nulls=True)
    with pytest.raises(PlanError, match="DISTINCT"):
        _call("rank", [], [pa.array([1])], None, distinct=True)
    with pytest.raises(PlanError, match="greater than zero"):
        _call("ntile", [pa.array([0])], [pa.array([1])], None)
    with pytest.raises(PlanError, match="rows"):
        _call("sum", [pa.array([1, 2, 3])], [pa.array([1, 2])], None)


def test_not_supported() -> None:
    wide = pa.array([decimal.Decimal("1e20")], pa.decimal128(30, 2))
    with pytest.raises(NotSupportedError, match="18 digits"):
        _call("sum", [wide], [], None)
    # a wide decimal whose values fit int64 sums exactly, also past int64
    fits = pa.array([decimal.Decimal(2**62)] * 3, pa.decimal128(38, 0))
    assert _call("sum", [fits], [], None).to_pylist() == [decimal.Decimal(3 * 2**62)] * 3


def test_integer_sum_beyond_bigint_is_exact() -> None:
    """SUM of integers is a HUGEINT (DECIMAL(38, 0)): frames past BIGINT sum exactly, on the
    high and low 32 bits of each value, plain and DISTINCT."""
    big = pa.array([2**62, 2**62, 2**62], pa.int64())
    assert _call("sum", [big], [], None).to_pylist() == [3 * 2**62] * 3
    assert _call("sum", [pa.array([2**62, 2**62 + 1], pa.int64())], [], None,
                 distinct=True).to_pylist() == [2**63 + 1] * 2
    assert _call("sum", [pa.array([-2**63, -2**63, None], pa.int64())], [], None
                 ).to_pylist() == [-2**64] * 3
    # duplicates do not add up in a DISTINCT sum
    assert _call("sum", [big], [], None, distinct=True).to_pylist() == [2**62] * 3
    # running sums past 2**63 whose frame totals fit are exact
    swing = pa.array([2**63 - 1, 2**63 - 1, -(2**63 - 1), -(2**63 - 1)], pa.int64())
    assert _call("sum", [swing], [], None).to_pylist() == [0] * 4


def test_dictionary_arguments_are_decoded() -> None:
    values = pa.array(["b", "a", None, "b"]).dictionary_encode()
    assert _call("max", [values], [], None).to_pylist() == ["b"] * 4
    assert _call("count", [values], [], None, distinct=True).to_pylist() == [2] * 4


def test_materialization_cap(monkeypatch) -> None:
    from plansight.engine.functions.window import materialize

    monkeypatch.setattr(materialize, "MAX_ELEMENTS", 10)
    values = pa.array([str(i) for i in range(20)])
    frame = FrameSpec("rows", P(5), CR)
    with pytest.raises(NotSupportedError, match="ROWS BETWEEN 5 PRECEDING AND CURRENT ROW"):
        _call("string_agg", [values], [], frame)
    # whole partitions never materialize
    assert _call("string_agg", [values], [], WHOLE_PARTITION)[0].as_py().count(",") == 19


@pytest.mark.parametrize("func,args,expected", [
    ("row_number", [], pa.int64()), ("ntile", [pa.int32()], pa.int64()),
    ("percent_rank", [], pa.float64()), ("cume_dist", [], pa.float64()),
    ("count", [pa.string()], pa.int64()), ("count_star", [], pa.int64()),
    ("sum", [pa.int8()], pa.decimal128(38, 0)), ("sum", [pa.uint64()], pa.decimal128(38, 0)),
    ("sum", [pa.float32()], pa.float64()), ("sum", [pa.decimal128(10, 2)],
                                            pa.decimal128(38, 2)),
    ("avg", [pa.int32()], pa.float64()), ("avg", [pa.decimal128(10, 2)], pa.float64()),
    ("min", [pa.date32()], pa.date32()), ("max", [pa.string()], pa.string()),
    ("first_value", [pa.timestamp("us")], pa.timestamp("us")),
    ("lag", [pa.float32(), pa.int64(), pa.float32()], pa.float32()),
    ("stddev", [pa.int64()], pa.float64()), ("variance", [pa.decimal128(5, 1)], pa.float64()),
    ("bool_or", [pa.bool_()], pa.bool_()), ("string_agg", [pa.string(), pa.string()],
                                            pa.string()),
])
def test_return_types(func: str, args: list, expected: pa.DataType) -> None:
    assert window_return_type(func, args) == expected


def test_sparse_table_matches_brute_force() -> None:
    rng = np.random.default_rng(5)
    for block_bits in (1, 2, 5):
        values = rng.integers(-1000, 1000, 300)
        lo = np.append(rng.integers(0, 300, 2000), 300)  # an empty query at the very end
        hi = np.minimum(lo + rng.integers(0, 300, 2001), 300)
        for op, identity, reduce in ((np.minimum, 10**6, np.min), (np.maximum, -10**6, np.max)):
            table = RangeExtremum(values, op, identity, int((hi - lo).max()), block_bits)
            expected = [reduce(values[a:b]) if b > a else identity for a, b in zip(lo, hi)]
            assert table.query(lo, hi).tolist() == expected


MODULES = ["__init__", "peers", "frames", "range_search", "ranking", "navigation", "aggregates",
           "prefix_sums", "summation", "sparse_table", "distinct", "materialize", "types"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(
        "plansight.engine.functions.window" + ("" if name == "__init__" else f".{name}"))
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failures == 0
