"""DECIMAL(p <= 18) arithmetic and SUM on scaled int64 against DuckDB: values at the edge of
their precision, NULLs, constants on either side, results that overflow their type (an error
on both engines), and sums too large for int64 (the decimal128 fallback)."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.kernels import decimal as D
from plansight.errors import ExecutionError
from tests.differential.harness import check


def _table() -> pa.Table:
    rng = np.random.default_rng(8)
    n = 400
    price = [None if i % 17 == 0 else Decimal(int(v)).scaleb(-2)
             for i, v in enumerate(rng.integers(-10**13, 10**13, n))]
    price[1], price[2] = Decimal("9999999999999.99"), Decimal("-9999999999999.99")
    rate = [None if i % 23 == 0 else Decimal(int(v)).scaleb(-2)
            for i, v in enumerate(rng.integers(0, 100, n))]
    rate[1], rate[2] = Decimal("0.99"), Decimal("0.99")
    big = [Decimal(10**17 - 1 - i).scaleb(-1) for i in range(n)]  # 17 digits, 1 decimal
    groups = rng.integers(0, 4, n)
    # string keys (Arrow's hash aggregation): group "none" has only NULL prices and rates
    names = [None if k == 0 and i % 5 == 0 else "none" if k == 3 and i % 2 == 0 else f"k{k}"
             for i, k in enumerate(groups)]
    for i, name in enumerate(names):
        if name == "none":
            price[i] = rate[i] = None
    return pa.table({"g": groups, "gs": pa.array(names, pa.string()),
                     "p": pa.array(price, pa.decimal128(15, 2)),
                     "r": pa.array(rate, pa.decimal128(15, 2)),
                     "s": pa.array([Decimal(int(v)) for v in rng.integers(-99, 99, n)],
                                   pa.decimal128(3, 0)),
                     "big": pa.array(big, pa.decimal128(18, 1))})


QUERIES = [
    "SELECT p * (1 - r), p * (1 - r) * (1 + r), p + r, p - r, r - 1, 2 * r, r * s FROM t",
    "SELECT p + s, s - p, p * s, s * 3, -1.5 * r, r * 0.25 FROM t",
    ("SELECT g, sum(p), sum(p * (1 - r)), sum(p * (1 - r) * (1 + r)), avg(p), count(p) "
     "FROM t GROUP BY g"),
    "SELECT sum(p), sum(r * s), min(p * r), max(p - r) FROM t",
    ("SELECT gs, sum(p), avg(p), avg(r), avg(s), avg(big), sum(big), count(p) FROM t "
     "GROUP BY gs"),
    "SELECT gs, avg(p * (1 - r)), avg(r) FROM t WHERE g = 3 GROUP BY gs",
    "SELECT g, sum(big) FROM t GROUP BY g",  # 100 x ~10**17: beyond int64, decimal128 sums
    "SELECT sum(big), sum(big - big) FROM t WHERE g < 0",  # empty: NULL
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_decimal_kernels_match_duckdb(sql, partitions, batch_size):
    check(sql, {"t": _table()}, target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("sql", [
    "SELECT p * p FROM t",            # 10**26 * 10**26: wraps int64, caught before
    "SELECT big * s FROM t",          # DECIMAL(18, 1) x DECIMAL(3, 0) beyond 18 digits
    "SELECT p * r * r * r * r FROM t",  # DECIMAL(18, 10) beyond its digits
])
def test_overflowing_results_are_errors_on_both_engines(sql):
    table = _table()
    con = duckdb.connect()
    con.register("t", table)
    with pytest.raises(duckdb.Error, match="(?i)overflow|out of range"):
        con.execute(sql).fetchall()
    session = ps.Session(target_partitions=1)
    session.register("t", table)
    with pytest.raises(ExecutionError, match="Overflow"):
        session.sql(sql).to_arrow()


def _words(ints: np.ndarray) -> np.ndarray:
    """The kernels' array operand: decimal128 words of int64 unscaled values."""
    return D.to_words(np.asarray(ints, dtype=np.int64))


def test_words_are_the_arrays_values_in_place():
    t = pa.decimal128(15, 2)
    values = pa.array([Decimal("1.25"), Decimal("-3.00"), None, Decimal("0.07")], t)
    assert D.words(values)[::2].tolist()[:2] == [125, -300]
    assert D.words(values.slice(3)).tolist() == [7, 0]
    assert len(D.words(values.slice(4))) == 0


def test_kernels_report_overflow_instead_of_wrapping():
    valid = np.ones(3, dtype=bool)
    big = _words([3 * 10**9, -(3 * 10**9), 5])
    _, ok = D.multiply_scaled(big, 1, big, 1, valid, 0, True)
    assert not ok  # 9e18 is too close to 2**63 to trust
    out, ok = D.multiply_scaled(big, 1, np.array([2], np.int64), 0, valid, 10**10, False)
    assert ok and out[::2].tolist() == [6 * 10**9, -6 * 10**9, 10]  # decimal128 words
    assert out[1::2].tolist() == [0, -1, 0]  # each value's sign word
    _, ok = D.add_scaled(big, 1, 1, np.array([10**9], np.int64), 0, -10, valid, 10**10)
    assert not ok  # -3e9 - 1e10 leaves DECIMAL(10)
    _, ok = D.add_scaled(big, 1, 3, big, 1, 1, valid, 10**10)
    assert not ok  # 4 x 3e9 leaves DECIMAL(10)
    out, ok = D.add_scaled(big, 1, 3, big, 1, 1, np.array([False, True, True]), 10**11)
    assert ok and out[::2].tolist() == [0, -12 * 10**9, 20]  # the masked row is skipped
    unmasked, ok = D.multiply_scaled(big, 1, np.array([2], np.int64), 0, np.ones(0, bool),
                                     10**10, False)  # no mask: every row, as many as a's
    assert ok and unmasked[::2].tolist() == [6 * 10**9, -6 * 10**9, 10]
    _, ok = D.add_scaled(np.array([7], np.int64), 0, 1, big, 1, 4, np.ones(0, bool), 10**10)
    assert not ok  # the constant first: the rows still come from b (4 x 3e9 + 7)


def test_tpch_q1_arithmetic_and_sums_take_the_int64_path(monkeypatch):
    calls = {"multiply": 0, "add": 0, "sum": 0}
    for name, key in (("multiply_scaled", "multiply"), ("add_scaled", "add")):
        original = getattr(D, name)

        def counted(*args, original=original, key=key):
            calls[key] += 1
            return original(*args)
        monkeypatch.setattr(D, name, counted)
    original_from = D.from_unscaled

    def from_unscaled(ints, valid, to):
        calls["sum"] += to.precision == 38
        return original_from(ints, valid, to)
    monkeypatch.setattr(D, "from_unscaled", from_unscaled)
    check("SELECT g, sum(p * (1 - r)), sum(r * (1 + r)) FROM t GROUP BY g", {"t": _table()})
    assert calls["multiply"] >= 2 and calls["add"] >= 2 and calls["sum"] >= 1, calls


@pytest.mark.parametrize("func", ["eq", "neq", "lt", "lte", "gt", "gte"])
def test_int64_decimal_comparisons_match_arrows(func):
    """The compiled comparison of DECIMAL(p <= 18) values (bits made 8 rows at a time) gives
    Arrow's result: negative values, a sliced array (offset, a length not a multiple of 8),
    a constant on either side; NULLs leave it to Arrow."""
    from plansight.engine.functions.scalar.comparison import _ARROW, _decimal_comparison

    rng = np.random.default_rng(7)
    t = pa.decimal128(15, 2)
    n = 5003  # above COMPILED_COMPARISON_ROWS, not a multiple of 8
    a = pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(-300, 300, n)], t)
    b = pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(-300, 300, n)], t)
    constant = pa.scalar(Decimal("-0.37"), t)
    for x, y in ((a, b), (a.slice(5), b.slice(5)), (a.slice(3, 4477), constant),
                 (constant, b.slice(11))):
        got = _decimal_comparison(func, x, y)
        assert got is not None and got.equals(_ARROW[func](x, y))
    with_null = pa.array([Decimal("1.00"), None] * n, t)
    assert _decimal_comparison(func, with_null, constant) is None
    assert _decimal_comparison(func, a.slice(0, 100), constant) is None  # short: Arrow's


def _reference_words(values: list[int | None]) -> list[int]:
    """decimal128 words of exact Python ints (0 under NULL), as the kernels write them."""
    words = []
    for v in values:
        v = 0 if v is None else v
        words += [v, -1 if v < 0 else 0]
    return words


@pytest.mark.parametrize("scale", [1, 10**4, 10**8, 3 * 10**9, 10**17])
@pytest.mark.parametrize("masked", [False, True])
def test_unchecked_and_checked_loops_agree_with_exact_arithmetic(scale, masked):
    """The kernels take an unchecked loop when the operands' magnitudes bound every result,
    the checked one otherwise: both give the exact words, or report overflow exactly when a
    valid row leaves its bound. Values under NULLs are garbage (int64's extremes included)
    and must neither leak into the words nor make a valid batch fail."""
    rng = np.random.default_rng(scale)
    for n in (0, 1, 3, 7, 8192):
        a = rng.integers(-scale, scale + 1, n, dtype=np.int64)
        b = rng.integers(-scale, scale + 1, n, dtype=np.int64)
        valid = rng.random(n) < 0.8 if masked else np.ones(0, bool)
        if masked and n:
            a[~valid] = np.iinfo(np.int64).min  # garbage under NULLs
        rows = {i for i in range(n) if not masked or valid[i]}
        for bound in (0, 10**18, 10**12):
            for a_step, b_step in ((1, 1), (1, 0), (0, 1)):
                x = _words(a) if a_step else np.array([scale - 1], np.int64)
                y = _words(b) if b_step else np.array([-(scale // 3)], np.int64)
                if not (a_step or b_step) or (not n and not (a_step and b_step)):
                    continue
                pick = lambda arr, step, i: int(arr[2 * i * step])  # noqa: E731
                products = [pick(x, a_step, i) * pick(y, b_step, i) if i in rows else None
                            for i in range(n)]
                limit = bound or 2**63
                fits = all(abs(p) < limit and abs(p) < 9 * 10**18
                           for p in products if p is not None)
                out, ok = D.multiply_scaled(x, a_step, y, b_step, valid, bound, True)
                assert ok == fits or (not ok and max(
                    (abs(p) for p in products if p is not None), default=0) >= 9 * 10**18 * 0.9)
                if ok:
                    assert out.tolist() == _reference_words(products)
                sums = [pick(x, a_step, i) * 3 - pick(y, b_step, i) * 10 if i in rows else None
                        for i in range(n)]
                out, ok = D.add_scaled(x, a_step, 3, y, b_step, -10, valid, bound)
                expected_ok = not bound or all(abs(s) < bound for s in sums if s is not None)
                assert ok == expected_ok
                if ok:
                    assert out.tolist() == _reference_words(sums)


@pytest.mark.parametrize("n", [0, 1, 3, 7, 8, 9, 8192, 8197])
def test_int64_decimal_comparison_kernel_gives_every_bit(n):
    """The compiled comparison packs 8 rows to a byte plus a last partial byte (whose unused
    bits stay 0): every operator, a constant on either side, against numpy's comparison of
    the same values."""
    rng = np.random.default_rng(n)
    a = rng.integers(-5, 6, n, dtype=np.int64)
    b = rng.integers(-5, 6, n, dtype=np.int64)
    constant = np.array([2], np.int64)
    operators = {"eq": np.equal, "neq": np.not_equal, "lt": np.less, "lte": np.less_equal,
                 "gt": np.greater, "gte": np.greater_equal}
    for func, op in operators.items():
        for x, x_step, y, y_step in ((a, 1, b, 1), (a, 1, constant, 0), (constant, 0, b, 1)):
            bits = D.compare_scaled(_words(x) if x_step else x, x_step,
                                    _words(y) if y_step else y, y_step, n, D.COMPARISONS[func])
            expected = op(x if x_step else np.full(n, x[0]), y if y_step else np.full(n, y[0]))
            assert bits.tolist() == np.packbits(expected, bitorder="little").tolist(), func


def _ranges_table() -> pa.Table:
    """Above the compiled comparison's row threshold at batch size 8192, with NULLs in one
    column (those go to Arrow) and ties at the range bounds."""
    rng = np.random.default_rng(6)
    n = 4500
    discount = [Decimal(int(v)).scaleb(-2) for v in rng.integers(0, 11, n)]
    quantity = [None if i % 13 == 0 else Decimal(int(v)) for i, v in enumerate(
        rng.integers(1, 51, n))]
    price = [Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**8, 10**8, n)]
    return pa.table({"d": pa.array(discount, pa.decimal128(15, 2)),
                     "q": pa.array(quantity, pa.decimal128(15, 2)),
                     "p": pa.array(price, pa.decimal128(15, 2))})


RANGE_QUERIES = [
    "SELECT sum(p * d), count(*) FROM t WHERE d BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND q < 24",
    ("SELECT count(*) FILTER (WHERE 0.05 < d), count(*) FILTER (WHERE 0.05 >= d), "
     "count(*) FILTER (WHERE d <> 0.04), count(*) FILTER (WHERE d = q / 1000), "
     "count(*) FILTER (WHERE p > d), count(*) FILTER (WHERE p <= d), "
     "count(*) FILTER (WHERE d = 0.03) FROM t"),
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", RANGE_QUERIES)
def test_decimal_range_predicates_match_duckdb(sql, partitions, batch_size):
    """TPC-H Q6's shape (BETWEEN on a decimal, < on another) and every operator with the
    constant on either side or two columns, counted so each predicate's rows matter."""
    check(sql, {"t": _ranges_table()}, target_partitions=partitions, batch_size=batch_size)


def test_decimal_range_predicates_take_the_compiled_comparison(monkeypatch):
    calls = []
    original = D.compare_scaled

    def counted(*args):
        calls.append(args[-1])
        return original(*args)
    monkeypatch.setattr(D, "compare_scaled", counted)
    for sql in RANGE_QUERIES:
        check(sql, {"t": _ranges_table()}, target_partitions=1, batch_size=8192)
    assert {D.COMPARISONS[f] for f in ("lt", "gte", "neq", "gt", "lte", "eq")} <= set(calls)


def test_two_constants_repeat_over_the_mask():
    """Both operands constant (the caller folds these, but the kernels stay in bounds):
    the value on every valid row, 0 under NULLs."""
    three, four = np.array([3], np.int64), np.array([-4], np.int64)
    valid = np.array([True, False, True])
    out, ok = D.multiply_scaled(three, 0, four, 0, valid, 10**18, True)
    assert ok and out.tolist() == [-12, -1, 0, 0, -12, -1]
    out, ok = D.add_scaled(three, 0, 10, four, 0, 1, valid, 10**18)
    assert ok and out.tolist() == [26, 0, 0, 0, 26, 0]
