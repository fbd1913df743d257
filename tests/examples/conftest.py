"""The example notebooks run in their own kernels with a user's defaults; the sessions these
tests make to compare with them use the same (tests/conftest.py pins the single-final
threshold to 0 elsewhere)."""

from __future__ import annotations

import pytest

from tests.session_defaults import users_final_aggregates


@pytest.fixture(autouse=True)
def _default_final_aggregates(_hashed_final_aggregates, monkeypatch):
    users_final_aggregates(monkeypatch)
