"""Whole-plan snapshots of what EnsureRequirements and the other physical rules arrange.

``plans/shapes.txt`` holds cases separated by ``====``: ``--`` comment lines (why the case is
there), ``-- partitions: N``, the SQL, ``----``, then the whole EXPLAIN text. Operator ids
that other lines refer to are numbered from 1 in order of appearance, so a snapshot does not
depend on which queries ran before it. Whole text, not substrings: an operator added or lost
anywhere fails the case. ``PLANSIGHT_UPDATE_FIXTURES=1`` rewrites the expected plans; read
the diff before committing it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pytest

import plansight as ps

SHAPES = Path(__file__).parent / "plans" / "shapes.txt"
UPDATE = os.environ.get("PLANSIGHT_UPDATE_FIXTURES") == "1"


def _session(partitions: int) -> ps.Session:
    s = ps.Session(target_partitions=partitions)
    n = 1000
    s.register("t", pa.table({"p": pa.array([i % 7 for i in range(n)], pa.int64()),
                              "o": pa.array(range(n), pa.int64()),
                              "v": pa.array([i * 0.5 for i in range(n)], pa.float64())}))
    s.register("d", pa.table({"p": pa.array(range(7), pa.int64()),
                              "name": [f"n{i}" for i in range(7)]}))
    s.register("s", pa.table({"k": pa.array(range(n), pa.int64()),
                              "x": pa.array(range(n), pa.int64())}), sorted_by=["k"])
    return s


def _normalized(text: str) -> str:
    """Operator ids renumbered 1, 2, ... in order of first appearance."""
    ids: dict[str, str] = {}

    def number(match: re.Match) -> str:
        ids.setdefault(match.group(2), str(len(ids) + 1))
        return match.group(1) + ids[match.group(2)]

    return re.sub(r"(id=|\[)(\d+)(?=[\],\s]|$)", number, text.rstrip())


def _cases() -> list[tuple[str, int, str, str]]:
    cases = []
    for block in SHAPES.read_text().split("\n====\n"):
        if not block.strip():
            continue
        head, _, expected = block.partition("\n----\n")
        lines = head.strip().splitlines()
        partitions = next(int(line.split(":")[1]) for line in lines
                          if line.startswith("-- partitions:"))
        comment = "\n".join(line for line in lines if line.startswith("--"))
        sql = " ".join(line for line in lines if not line.startswith("--"))
        cases.append((comment, partitions, sql, expected.strip("\n")))
    return cases


def _explain(partitions: int, sql: str) -> str:
    return _normalized(_session(partitions).sql(sql).explain())


def test_plan_shapes():
    cases = _cases()
    if UPDATE:
        SHAPES.write_text("\n====\n".join(
            f"{comment}\n{sql}\n----\n{_explain(partitions, sql)}"
            for comment, partitions, sql, _ in cases) + "\n")
        cases = _cases()
    assert len(cases) >= 8
    for comment, partitions, sql, expected in cases:
        actual = _explain(partitions, sql)
        assert actual == expected, f"{comment}\n{sql}\n--- got:\n{actual}"


@pytest.mark.parametrize("text, expected", [
    ("HashJoinExec: mode=CollectLeft, id=24\n  x from HashJoin[24]",
     "HashJoinExec: mode=CollectLeft, id=1\n  x from HashJoin[1]"),
    ("a, id=9\nb, id=3\nc from X[9]", "a, id=1\nb, id=2\nc from X[1]"),
])
def test_ids_are_renumbered_in_order(text, expected):
    assert _normalized(text) == expected
