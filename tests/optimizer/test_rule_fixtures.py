"""Golden fixtures per logical rule: input SQL -> the bound plan after that one rule.

In the style of sqlglot's optimizer fixtures: ``fixtures/<rule>.txt`` holds cases separated by
``====``; each is optional ``--`` comment lines saying why the case is there, the SQL, a line
``----``, then the plan text the rule alone makes of the bound (unoptimized) plan. Every rule
in ``RULES`` must have a fixture file, so no rule goes untested by name.

A file whose first line is ``-- input: pipeline`` starts each case from the plan the rule
sees in the pipeline (every rule before its first place in ``RULES`` applied), for rules that
rely on earlier ones (join reordering needs the filters pushed down).

To (re)write the expected plans after an intended change, run with
``PLANSIGHT_UPDATE_FIXTURES=1`` and read the diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.logical.plan import format_plan
from plansight.engine.optimizer.optimizer import RULES

FIXTURES = Path(__file__).parent / "fixtures"
UPDATE = os.environ.get("PLANSIGHT_UPDATE_FIXTURES") == "1"
RULE_NAMES = sorted({rule.__name__ for rule in RULES})
BY_NAME = {rule.__name__: rule for rule in RULES}


def _session() -> ps.Session:
    s = ps.Session(target_partitions=1)
    s.register("t", pa.table({"a": pa.array([1, 2], pa.int64()), "b": ["x", "y"],
                              "c": pa.array([1.5, 2.5], pa.float64()),
                              "i": pa.array([1, 2], pa.int32())}))
    s.register("u", pa.table({"a": pa.array([1, 3], pa.int64()),
                              "d": pa.array([10, 30], pa.int64())}))
    s.register("v", pa.table({"d": pa.array([10, 20], pa.int64()), "e": ["p", "q"]}))
    s.register("f", pa.table({"a": pa.array([i % 3 for i in range(30_000)], pa.int64()),
                              "g": pa.array(range(30_000), pa.int64())}))
    return s


def _cases(rule: str) -> list[tuple[str, str, str]]:
    """(comment, sql, expected plan) of every case in ``rule``'s fixture file."""
    text = (FIXTURES / f"{rule}.txt").read_text()
    cases = []
    for block in text.split("\n====\n"):
        if not block.strip():
            continue
        head, _, expected = block.partition("\n----\n")
        lines = head.strip().splitlines()
        comment = "\n".join(line for line in lines if line.startswith("--"))
        sql = " ".join(line for line in lines if not line.startswith("--"))
        cases.append((comment, sql, expected.strip("\n")))
    return cases


def _apply(rule: str, sql: str) -> str:
    plan = _session().sql(sql).logical
    if (FIXTURES / f"{rule}.txt").read_text().startswith("-- input: pipeline"):
        for earlier in RULES[:[r.__name__ for r in RULES].index(rule)]:
            plan = earlier(plan)
    return format_plan(BY_NAME[rule](plan))


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_every_rule_has_fixtures(rule):
    assert (FIXTURES / f"{rule}.txt").exists(), f"add tests/optimizer/fixtures/{rule}.txt"
    assert _cases(rule), f"{rule}.txt has no case"


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_rule_fixtures(rule):
    cases = _cases(rule)
    if UPDATE:
        blocks = [f"{comment}\n{sql}\n----\n{_apply(rule, sql)}".lstrip("\n")
                  for comment, sql, _ in cases]
        (FIXTURES / f"{rule}.txt").write_text("\n====\n".join(blocks) + "\n")
        cases = _cases(rule)
    for comment, sql, expected in cases:
        actual = _apply(rule, sql)
        assert actual == expected, f"{rule}: {comment}\n{sql}\n--- got:\n{actual}"
