"""Random adversarial tables: NULLs, duplicates, NaN, +-0.0, infinities, empty strings,
integer extremes, and empty tables.

Every table has the same columns (queries qualify them), plus ``id``, unique per table, so
a window or ORDER BY can be made a total order:

    id BIGINT, i INTEGER, j BIGINT, f DOUBLE, d DECIMAL(10, 2), s VARCHAR, b BOOLEAN, dt DATE
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa

COLUMNS = {  # name -> (type, category used by the query generator)
    "i": (pa.int32(), "int"),
    "j": (pa.int64(), "int"),
    "f": (pa.float64(), "float"),
    "d": (pa.decimal128(10, 2), "dec"),
    "s": (pa.string(), "str"),
    "b": (pa.bool_(), "bool"),
    "dt": (pa.date32(), "date"),
}

_VALUES = {
    "i": [0, 1, -1, 2, 3, 7, 100, -100, 2**31 - 1, -(2**31)],
    "j": [0, 1, -1, 5, 42, 10**12, -(10**12), 2**62, -(2**62)],
    "f": [0.0, -0.0, 1.5, -2.25, 3.125, 1e10, float("nan"), float("inf"), float("-inf"), 7.0],
    "d": [Decimal(x) for x in ("0.00", "1.50", "-2.25", "99999999.99", "-0.01", "3.33",
                               "12.34")],
    "s": ["", "a", "A", "b", "ab", "a b", "é", "zz", "%", "_x"],
    "b": [True, False],
    "dt": [dt.date(2024, 2, 29), dt.date(1970, 1, 1), dt.date(2000, 1, 1), dt.date(1999, 12, 31),
           dt.date(2024, 12, 31)],
}


def random_table(rng: random.Random) -> pa.Table:
    """0..12 rows; each column drawn from a small pool (duplicates) with some NULLs."""
    rows = rng.choice([0, 1, 2, 3, 5, 8, 12])
    columns = {"id": pa.array(range(rows), pa.int64())}
    for name, (type_, _) in COLUMNS.items():
        pool = rng.sample(_VALUES[name], k=min(len(_VALUES[name]), rng.randint(1, 5)))
        null_share = rng.choice([0.0, 0.2, 0.5, 1.0])
        values = [None if rng.random() < null_share else rng.choice(pool) for _ in range(rows)]
        columns[name] = pa.array(values, type_)
    return pa.table(columns)


def random_tables(rng: random.Random, count: int = 3) -> dict[str, pa.Table]:
    return {f"t{n}": random_table(rng) for n in range(count)}
