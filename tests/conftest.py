"""Suite-wide session defaults.

Two-phase aggregates run the way they run on many groups everywhere but tests/tpch (its own
conftest) and the tests of the single-final path (they set the option): partial states
hashed into ``target_partitions`` final aggregates. With the default threshold most test
tables are small enough that the planner would merge their states in one partition instead,
and the hashed path would go untested.
"""

from __future__ import annotations

import pytest

from tests.session_defaults import session_defaults


@pytest.fixture(autouse=True)
def _hashed_final_aggregates(monkeypatch):
    session_defaults(monkeypatch, aggregate_single_final_threshold_rows=0)
