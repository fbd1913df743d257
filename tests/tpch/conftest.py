"""TPC-H runs with the planner's default single-final threshold (tests/conftest.py pins it
to 0 elsewhere): these are the plans users get."""

from __future__ import annotations

import pytest

from tests.session_defaults import users_final_aggregates


@pytest.fixture(autouse=True)
def _default_final_aggregates(_hashed_final_aggregates, monkeypatch):
    users_final_aggregates(monkeypatch)
