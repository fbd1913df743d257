"""No raw exception reaches a user: at the query boundary anything that is not a
PlansightError becomes InternalError naming the original type, message and operator.

The faults are injected (a bug stands in for the bugs random SQL found), so the tests keep
holding once those bugs are fixed.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.optimizer import optimizer
from plansight.engine.physical.projection import ProjectionExec
from plansight.errors import InternalError


@pytest.fixture
def session():
    s = ps.Session(target_partitions=2, batch_size=3)
    s.register("t", pa.table({"x": list(range(20))}))
    yield s
    assert s.sql("SELECT sum(x) FROM t").to_arrow().column(0).to_pylist() == [190]


def _broken_execute(self, partition, ctx):
    for batch in self.input.execute(partition, ctx):
        raise IndexError("index -1 is out of bounds")
        yield batch  # pragma: no cover


def test_an_operator_bug_is_an_internal_error_naming_the_operator(session, monkeypatch):
    monkeypatch.setattr(ProjectionExec, "_execute", _broken_execute)
    with pytest.raises(InternalError) as info:
        session.sql("SELECT x + 1 AS y FROM t").to_arrow()
    message = str(info.value)
    assert "IndexError: index -1 is out of bounds" in message
    assert "ProjectionExec[" in message
    assert isinstance(info.value.original, IndexError)
    assert info.value.__cause__ is info.value.original
    monkeypatch.undo()


def test_a_planning_bug_is_an_internal_error(session, monkeypatch):
    def broken(plan):
        raise KeyError("k#1")
    monkeypatch.setattr(optimizer, "RULES", (broken, *optimizer.RULES))
    with pytest.raises(InternalError, match=r"KeyError: 'k#1' \(while planning\)"):
        session.sql("SELECT x FROM t WHERE x > 3").to_arrow()
    monkeypatch.undo()


def test_arrow_invalid_input_stays_an_execution_error_naming_the_operator(session,
                                                                          monkeypatch):
    def invalid(self, partition, ctx):
        raise pa.ArrowInvalid("bad input")
        yield  # pragma: no cover
    monkeypatch.setattr(ProjectionExec, "_execute", invalid)
    with pytest.raises(ps.errors.ExecutionError, match=r"ProjectionExec\[\d\]\): bad input"):
        session.sql("SELECT x + 1 AS y FROM t").to_arrow()
    monkeypatch.undo()
