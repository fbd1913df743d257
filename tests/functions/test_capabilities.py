"""Every aggregate and window function has a capabilities entry, and the flags agree with
what the kernels really do (checked by running them)."""

from __future__ import annotations

import pytest

from plansight.engine.functions.aggregate import AGGREGATES
from plansight.engine.functions.capabilities import FUNCTIONS, capabilities
from plansight.engine.functions.comoments import BIVARIATE
from plansight.engine.functions.window import WINDOW_FUNCTIONS
from tests.differential.harness import check
from tests.windows.window_cases import TABLES


def test_every_function_is_described():
    missing = (set(AGGREGATES) | set(WINDOW_FUNCTIONS)) - set(FUNCTIONS)
    assert missing == set()


def test_unknown_functions_can_do_nothing_special():
    nothing = capabilities("no_such_function")
    assert not (nothing.decomposable or nothing.order_free or nothing.frameless or
                nothing.broadcasts or nothing.count_like) and nothing.streams is None


FRAMES = ["ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
          "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW",
          "GROUPS BETWEEN 2 PRECEDING AND 1 FOLLOWING EXCLUDE TIES"]


@pytest.mark.parametrize("executor", ["auto", "sorted", "partition"])
@pytest.mark.parametrize("frame", FRAMES)
@pytest.mark.parametrize("name", sorted(n for n, c in FUNCTIONS.items()
                                        if c.frameless and n not in ("ntile", "lag", "lead")))
def test_frameless_functions_ignore_the_frame(name, frame, executor):
    # ranking over a window with a frame equals ranking without one (DuckDB ignores it too)
    order = "o, id" if name == "row_number" else "o"  # row numbers of ties are arbitrary
    framed = f"SELECT id, {name}() OVER (PARTITION BY p ORDER BY {order} {frame}) AS r FROM t"
    check(framed, {"t": TABLES["mixed"]}, target_partitions=2, batch_size=7,
          window_executor=executor)


@pytest.mark.parametrize("name", sorted(n for n, c in FUNCTIONS.items()
                                        if c.order_free and n in WINDOW_FUNCTIONS))
def test_order_free_functions_over_whole_partitions_match_duckdb(name):
    arg = "*" if name == "count_star" else ("v > 0" if name.startswith("bool") else
                                            "o" if name.startswith("bit_") else
                                            "v, o" if name in BIVARIATE else "v")
    func = "count" if name == "count_star" else name
    sql = f"SELECT id, {func}({arg}) OVER (PARTITION BY p) AS r FROM t"
    check(sql, {"t": TABLES["mixed"]}, target_partitions=3, batch_size=3)
