"""The comparison rules of the differential harness itself."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from tests.differential.harness import assert_same, order_key_positions


def _t(**columns) -> pa.Table:
    return pa.table(columns)


def test_multiset_ignores_row_order_and_column_names():
    assert_same(_t(a=[1, 2, None]), _t(b=[None, 2, 1]), ordered=False)


def test_multiset_of_values_sharing_a_rounded_sort_key():
    """99999999.99 and 100000003.31 both sort as 1.0000000e8 (the tolerance's rounding):
    each side keeps its own order among them, and every row still has its partner."""
    dec = pa.decimal128(38, 2)
    values = [Decimal("100000003.31"), Decimal("3.32"), Decimal("99999999.99")]
    assert_same(_t(a=pa.array(values, dec)), _t(a=pa.array(values[::-1], dec)), ordered=False)
    assert_same(_t(a=[1e8 + 3.31, 1e8 - 0.01]), _t(a=[1e8 - 0.01, 1e8 + 3.31]), ordered=False)
    with pytest.raises(AssertionError, match="results differ"):
        assert_same(_t(a=pa.array(values, dec)),
                    _t(a=pa.array(values[:2] + [Decimal("99999000.00")], dec)), ordered=False)


def test_multiset_of_close_values_pairs_equal_ones():
    """Five doubles a unit apart share one rounded sort key and are each within tolerance
    of their neighbours (fuzzer seed 9302, query 8444, a false TLP mismatch): equal
    multisets in different orders still match, and a changed value still differs."""
    values = [-2147483647.0 + i for i in range(5)]
    shuffled = [values[i] for i in (1, 2, 4, 0, 3)]
    assert_same(_t(a=shuffled, b=[False] * 5), _t(a=values, b=[False] * 5), ordered=False)
    with pytest.raises(AssertionError, match="results differ"):
        assert_same(_t(a=shuffled), _t(a=values[:4] + [-2147483600.0]), ordered=False)


def test_values_compare_across_types():
    assert_same(_t(a=pa.array([1, None], pa.int32())),
                _t(a=pa.array([Decimal(1), None], pa.decimal128(38, 0))), ordered=False)
    assert_same(_t(a=[1.0000000000001]), _t(a=[1.0]), ordered=False)
    assert_same(_t(a=[float("nan")]), _t(a=[float("nan")]), ordered=False)
    assert_same(_t(a=pa.array([dt.date(2024, 1, 1)])),
                _t(a=pa.array([dt.datetime(2024, 1, 1)])), ordered=False)
    assert_same(_t(a=[2**62 + 1]), _t(a=pa.array([Decimal(2**62 + 1)], pa.decimal128(38, 0))),
                ordered=False)


@pytest.mark.parametrize("actual,expected", [
    ([1, 2], [1, 3]),
    ([1, None], [1, 0]),
    ([True], [1]),
    ([2**62 + 1], [2**62]),
    ([1.0], [1.001]),
])
def test_differences_are_reported(actual, expected):
    with pytest.raises(AssertionError, match="differ"):
        assert_same(_t(a=actual), _t(a=expected), ordered=False, sql="SELECT a FROM t")


def test_row_count_difference_lists_the_extra_rows():
    with pytest.raises(AssertionError, match=r"row count differs.*\n.*\(3,\)"):
        assert_same(_t(a=[1, 2, 3]), _t(a=[1, 2]), ordered=False)


def test_ordered_allows_any_order_within_ties():
    sql = "SELECT k, v FROM t ORDER BY k"
    assert order_key_positions(sql) == ([0], False)
    assert_same(_t(k=[1, 1, 2], v=["a", "b", "c"]), _t(k=[1, 1, 2], v=["b", "a", "c"]),
                ordered=True, sql=sql)
    with pytest.raises(AssertionError, match="ORDER BY keys differ"):
        assert_same(_t(k=[2, 1, 1], v=["c", "a", "b"]), _t(k=[1, 1, 2], v=["b", "a", "c"]),
                    ordered=True, sql=sql)


def test_ordered_with_limit_relaxes_only_the_last_run_of_ties():
    sql = "SELECT k, v FROM t ORDER BY k LIMIT 2"
    assert_same(_t(k=[0, 1], v=["x", "a"]), _t(k=[0, 1], v=["x", "b"]), ordered=True, sql=sql)
    with pytest.raises(AssertionError):
        assert_same(_t(k=[0, 1], v=["y", "a"]), _t(k=[0, 1], v=["x", "a"]), ordered=True,
                    sql=sql)


def test_order_keys_resolve_ordinals_aliases_and_expressions():
    assert order_key_positions("SELECT a, b AS x FROM t ORDER BY 2, a")[0] == [1, 0]
    assert order_key_positions("SELECT a, b + 1 FROM t ORDER BY b + 1 DESC")[0] == [1]
    # a key that is not an output column: compared strictly in order
    assert order_key_positions("SELECT a FROM t ORDER BY b")[0] is None
