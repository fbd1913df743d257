"""Join order of the TPC-H queries with the most joins (SF 0.01 Parquet): whole EXPLAIN text
against the snapshots in plans/, and the property the snapshots show: the filtered dimension
(nation or region after its filter) is joined before the fact table it shrinks, and the
build (left) side of each of those joins is the smaller input.

Regenerate a snapshot after an intended plan change with
``PLANSIGHT_UPDATE_PLANS=1 pytest tests/tpch/test_join_order.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import plansight as ps
from plansight.datasets import TPCH_QUERIES, tpch_parquet

PLANS = Path(__file__).parent / "plans"


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    directory = tpch_parquet(tmp_path_factory.mktemp("tpch"), 0.01)
    s = ps.Session(target_partitions=1)
    for name in sorted(os.listdir(directory)):
        s.register_parquet(name.split(".")[0], os.path.join(directory, name))
    return s


def _scans_in_join_order(plan: str) -> list[str]:
    """Tables in the order the deepest-first walk of the plan meets them."""
    lines = plan.splitlines()
    scans = [(len(line) - len(line.lstrip()), re.search(r"table=(\w+)", line).group(1))
             for line in lines if "DataSourceExec" in line]
    return [table for _, table in sorted(scans, key=lambda s: -s[0])]


def _normalized(plan: str) -> str:
    """Operator ids (in dynamic filter names) count up per process: not part of the plan."""
    return re.sub(r"id=\d+", "id=#", re.sub(r"\[\d+\]", "[#]", plan))


@pytest.mark.parametrize("number", [21, 5, 7, 8, 9])
def test_explain_matches_snapshot(session, number):
    plan = _normalized(session.sql(TPCH_QUERIES[number]).explain())
    path = PLANS / f"q{number:02d}.txt"
    if os.environ.get("PLANSIGHT_UPDATE_PLANS"):
        path.write_text(plan + "\n")
    assert plan + "\n" == path.read_text()


@pytest.mark.parametrize("number, first", [(21, ["nation", "supplier"]),
                                           (7, ["nation", "supplier"]),
                                           (5, ["region", "nation"]),
                                           (8, ["region", "nation"])])
def test_filtered_dimension_is_joined_first(session, number, first):
    plan = session.sql(TPCH_QUERIES[number]).explain()
    assert _scans_in_join_order(plan)[:2] == first, plan
