"""TPC-H runs with the planner's default single-final threshold (tests/conftest.py pins it
to 0 elsewhere): these are the plans users get."""

from __future__ import annotations

import pytest

from plansight.engine.exec.context import SessionConfig
from tests.session_defaults import session_defaults


@pytest.fixture(autouse=True)
def _default_final_aggregates(_hashed_final_aggregates, monkeypatch):
    session_defaults(monkeypatch, aggregate_single_final_threshold_rows=SessionConfig.
                     aggregate_single_final_threshold_rows)
