"""SUM over DECIMAL(p > 18) values that fit int64 (the partial sums a final aggregate
merges, typed DECIMAL(38, s)) runs on scaled int64; values or totals beyond int64 still take
Arrow's 128-bit path. Against DuckDB, with NULLs, many groups, groups whose total leaves
int64, at partitions 1/2/3/8 (2 and more: partial + final) and batch sizes 1/3/7/8192."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.kernels import decimal as D
from tests.differential.harness import check


def _tables() -> dict[str, pa.Table]:
    r = np.random.default_rng(21)
    n = 500
    g = r.integers(0, 60, n)
    small = [None if i % 11 == 0 else decimal.Decimal(int(v)).scaleb(-2)
             for i, v in enumerate(r.integers(-10**6, 10**6, n))]
    # near the int64 edge: a group of them sums past 2**63 (as unscaled hundredths)
    edge = [decimal.Decimal(int(v)).scaleb(-2) for v in r.integers(4 * 10**18, 9 * 10**18, n)]
    # some beyond int64 outright
    huge = [decimal.Decimal(10**20 + int(v)).scaleb(-2) if i % 7 == 0 else
            decimal.Decimal(int(v)).scaleb(-2) for i, v in enumerate(r.integers(0, 1000, n))]
    return {"t": pa.table({"g": pa.array(g, pa.int64()),
                           "small": pa.array(small, pa.decimal128(38, 2)),
                           "edge": pa.array(edge, pa.decimal128(38, 2)),
                           "huge": pa.array(huge, pa.decimal128(38, 2)),
                           "q": pa.array(small, pa.decimal128(15, 2))})}


QUERIES = [
    "SELECT g, sum(small), count(small) FROM t GROUP BY g",
    "SELECT g, sum(q) FROM t GROUP BY g HAVING sum(q) > 0",
    "SELECT g, sum(edge) FROM t GROUP BY g",
    "SELECT g % 5, sum(huge), sum(small) FROM t GROUP BY g % 5",
    "SELECT sum(small), sum(huge), sum(edge) FROM t",
    "SELECT g, sum(small) FROM t WHERE small IS NULL GROUP BY g",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_wide_decimal_sums_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


def test_values_fit_int64_looks_at_every_non_null_value():
    fits = pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("-92233720368547758.08")],
                    pa.decimal128(38, 2))
    assert D.values_fit_int64(fits)
    assert D.values_fit_int64(fits.slice(1))
    beyond = pa.array([decimal.Decimal("1.5"), decimal.Decimal("92233720368547758.08")],
                      pa.decimal128(38, 2))
    assert not D.values_fit_int64(beyond)
    assert D.values_fit_int64(beyond.slice(0, 1))
    assert not D.values_fit_int64(pa.chunked_array([fits, beyond]))


# near the 38-digit limit: a group whose total passes it (an error in both engines), totals
# that come back within it after passing 2**127 on the way in no engine's order, and NULLs
_LIMIT = 10**37 * 9
_EDGE_TABLES = {"e": pa.table({
    "g": pa.array([1, 1, 2, 2, 2, 3, 3, 4], pa.int64()),
    "v": pa.array([None if x is None else decimal.Decimal(x) for x in
                   (_LIMIT, _LIMIT, _LIMIT, -_LIMIT, 5, -_LIMIT, None, 10**38 - 1)],
                  pa.decimal128(38, 0)),
})}


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_sums_past_38_digits_are_an_error_not_a_wrapped_value(partitions, batch_size):
    from plansight.errors import ExecutionError
    from tests.differential.harness import run_plansight

    options = {"target_partitions": partitions, "batch_size": batch_size}
    check("SELECT g, sum(v) FROM e WHERE g > 1 GROUP BY g", _EDGE_TABLES, **options)
    for sql in ("SELECT g, sum(v) FROM e GROUP BY g", "SELECT sum(v) FROM e WHERE g = 1",
                "SELECT sum(v) FROM e WHERE g IN (1, 4)"):
        with pytest.raises(ExecutionError, match=r"Overflow in SUM\(v\).*DECIMAL\(38, 0\)"):
            run_plansight(sql, _EDGE_TABLES, **options)


def test_sums_overflow_tells_wrapped_and_too_wide_totals():
    ok = pa.array([decimal.Decimal(10**38 - 1), None, decimal.Decimal(-5)], pa.decimal128(38, 0))
    assert not D.sums_overflow(ok, np.array([1e38, 0.0, -5.0]))
    # 2**128 away from its shadow: a wrapped 128-bit sum
    assert D.sums_overflow(ok, np.array([1e38 - 2.0**128, 0.0, -5.0]))
    # the shadow agrees but the value has 39 digits (Arrow's decimal sum does not check)
    wide = pa.Array.from_buffers(pa.decimal128(38, 0), 1, [None, pa.py_buffer(
        (10**38).to_bytes(16, "little", signed=True))])
    assert D.sums_overflow(wide, np.array([1e38]))
