"""The terminal entry point: ``--explain`` plans without running; long results print only
the rows shown."""

from __future__ import annotations

import pyarrow as pa

import plansight as ps
from plansight.cli import format_table, main


def test_explain_does_not_run_the_query(monkeypatch, capsys):
    def never(self, observer=None):
        raise AssertionError("the query ran")

    monkeypatch.setattr(ps.Query, "execute", never)
    assert main(["--explain", "--scale", "0.001", "SELECT count(*) FROM lineitem"]) == 0
    out = capsys.readouterr().out
    assert "AggregateExec" in out and "\n1 row" not in out and " ms)" not in out


def test_long_results_print_head_and_tail():
    text = format_table(pa.table({"x": list(range(1_000_000))}))
    lines = text.splitlines()
    assert len(lines) < 50 and "| 999999 |" in text and lines[-1] == "1000000 rows"


def test_demo_ends_with_a_plan_with_metrics_and_what_to_try_next(capsys):
    assert main(["--demo", "--scale", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "metrics=[output_rows=" in out and "Try next" in out
    assert out.index("metrics=[") < out.index("Try next")
