"""MIN and MAX of INTERVAL columns (Arrow has no kernel for them) versus DuckDB.

Intervals compare by length with a month = 30 days, so the table spells equal lengths many
ways (tables.intervals); results are compared by their length in seconds (``epoch``), where
the spelling of a tie does not matter, and by their text where every length in a group is
spelled once. ``epoch`` of a year differs (DuckDB counts 365.25 days, plansight 360), so
the epoch queries leave out the year-long rows. NULLs, empty groups and empty input, batch
sizes 1/3/7/8192, partitions 1/2/3/8 (two-phase aggregation merges partial MIN/MAX).
"""

from __future__ import annotations

import pytest

from tests.differential.harness import check
from tests.differential.tables import intervals

TABLES = {"iv": intervals(200, 5), "iv_empty": intervals(200, 5).slice(0, 0)}

SHORT = "(iv IS NULL OR iv < INTERVAL 300 DAY)"
QUERIES = [
    "SELECT epoch(min(iv)) AS lo, epoch(max(iv)) AS hi, count(iv) AS c FROM iv "
    f"WHERE {SHORT}",
    "SELECT id % 7 AS g, epoch(min(iv)) AS lo, epoch(max(iv)) AS hi, count(*) AS c FROM iv "
    f"WHERE {SHORT} GROUP BY g",
    "SELECT id % 3 AS g, epoch(max(iv)) AS hi FROM iv WHERE id < 40 AND iv IS NULL GROUP BY g",
    # one spelling per group: the text must match too
    "SELECT id AS g, min(iv)::VARCHAR AS lo, max(iv)::VARCHAR AS hi FROM iv GROUP BY id",
    "SELECT min(iv)::VARCHAR AS lo, max(iv)::VARCHAR AS hi FROM iv_empty",
]

CONFIGS = [pytest.param({"batch_size": b, "target_partitions": p}, id=f"b{b}p{p}")
           for b in (1, 3, 7, 8192) for p in (1, 2, 3, 8)]


@pytest.mark.parametrize("options", CONFIGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_interval_min_max(sql: str, options: dict) -> None:
    check(sql, TABLES, **options)
